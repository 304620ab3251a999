package app

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// ErrBadInitialControllers: --initial-controllers (or --standalone) cannot
// describe a voter set.
var ErrBadInitialControllers = errors.New("storage: bad initial controllers")

// DynamicVoter is one entry of --initial-controllers, id@host:port:directory-id
// (Kafka's DynamicVoter).
type DynamicVoter struct {
	ID          int32
	Host        string
	Port        uint16
	DirectoryID UUID
}

// String renders the voter back into --initial-controllers syntax.
func (v DynamicVoter) String() string {
	return fmt.Sprintf("%d@%s:%s", v.ID, joinHostPort(v.Host, int(v.Port)), v.DirectoryID)
}

// ParseInitialControllers parses --initial-controllers: a comma-separated list
// of id@host:port:directory-id, as kafka-storage.sh takes it (a host in
// brackets may hold colons, for IPv6). Ids must be unique and directory ids
// must be real ones (not the reserved zero and one UUIDs) and unique.
func ParseInitialControllers(s string) ([]DynamicVoter, error) {
	var voters []DynamicVoter
	seenID := map[int32]bool{}
	seenDir := map[UUID]bool{}
	for _, part := range strings.Split(s, ",") {
		v, err := parseDynamicVoter(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadInitialControllers, part, err)
		}
		if seenID[v.ID] {
			return nil, fmt.Errorf("%w: node id %d appears more than once", ErrBadInitialControllers, v.ID)
		}
		if seenDir[v.DirectoryID] {
			return nil, fmt.Errorf("%w: directory id %s appears more than once", ErrBadInitialControllers, v.DirectoryID)
		}
		seenID[v.ID], seenDir[v.DirectoryID] = true, true
		voters = append(voters, v)
	}
	return voters, nil
}

func parseDynamicVoter(s string) (DynamicVoter, error) {
	idText, rest, ok := strings.Cut(s, "@")
	if !ok {
		return DynamicVoter{}, errors.New("no @ found")
	}
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil || id < 0 {
		return DynamicVoter{}, fmt.Errorf("node id %q is not a non-negative integer", idText)
	}
	var host string
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 {
			return DynamicVoter{}, errors.New("hostname began with a left bracket but has no right bracket")
		}
		host, rest = rest[1:end], rest[end+1:]
	} else {
		i := strings.Index(rest, ":")
		if i < 0 {
			return DynamicVoter{}, errors.New("no colon after the hostname")
		}
		host, rest = rest[:i], rest[i:]
	}
	if host == "" {
		return DynamicVoter{}, errors.New("no hostname after the node id")
	}
	rest, ok = strings.CutPrefix(rest, ":")
	if !ok {
		return DynamicVoter{}, errors.New("the port must start with a colon")
	}
	portText, dirText, ok := strings.Cut(rest, ":")
	if !ok {
		return DynamicVoter{}, errors.New("no colon after the port")
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return DynamicVoter{}, fmt.Errorf("port %q is not in 0-65535", portText)
	}
	dir, err := ParseUUID(dirText)
	if err != nil {
		return DynamicVoter{}, fmt.Errorf("directory id: %v", err)
	}
	if dir.IsReserved() {
		return DynamicVoter{}, fmt.Errorf("directory id %s is reserved", dir)
	}
	return DynamicVoter{ID: int32(id), Host: host, Port: uint16(port), DirectoryID: dir}, nil
}

// formatQuorum is what Format does for the metadata directory's quorum.
type formatQuorum struct {
	// voters is the initial voter set; nil for a static quorum or
	// --no-initial-controllers.
	voters []DynamicVoter
}

// planQuorum checks the quorum options of Format against cfg, as
// kafka-storage.sh does, and draws the directory id of a --standalone voter.
func planQuorum(cfg *Config, opts FormatOptions) (formatQuorum, error) {
	n := 0
	for _, set := range []bool{opts.Standalone, opts.InitialControllers != "", opts.NoInitialControllers} {
		if set {
			n++
		}
	}
	if n > 1 {
		return formatQuorum{}, errors.New("storage format: --standalone, --initial-controllers and " +
			"--no-initial-controllers exclude each other")
	}
	var q formatQuorum
	switch {
	case opts.Standalone:
		v, err := standaloneVoter(cfg, opts)
		if err != nil {
			return formatQuorum{}, err
		}
		q.voters = []DynamicVoter{v}
	case opts.InitialControllers != "":
		voters, err := ParseInitialControllers(opts.InitialControllers)
		if err != nil {
			return formatQuorum{}, err
		}
		q.voters = voters
	}
	if cfg.HasRole(RoleController) && len(cfg.QuorumVoters) == 0 && q.voters == nil && !opts.NoInitialControllers {
		return formatQuorum{}, errors.New("storage format: because controller.quorum.voters is not set on this " +
			"controller, you must specify one of the following: --standalone, --initial-controllers, or " +
			"--no-initial-controllers")
	}
	if q.voters != nil && len(cfg.QuorumVoters) > 0 {
		return formatQuorum{}, errors.New("storage format: --standalone and --initial-controllers format a dynamic " +
			"quorum (KIP-853), which controller.quorum.voters (a static quorum) contradicts; use " +
			"controller.quorum.bootstrap.servers instead")
	}
	return q, nil
}

// standaloneVoter is this controller as the single voter of a new dynamic
// quorum: its first controller listener as advertised (advertised.listeners
// may name it, as Kafka 4.x's server.properties does; host "localhost" when
// the listener binds every interface) and a fresh directory id.
func standaloneVoter(cfg *Config, opts FormatOptions) (DynamicVoter, error) {
	if !cfg.HasRole(RoleController) {
		return DynamicVoter{}, errors.New("storage format: you can only use --standalone on a controller")
	}
	eps := AdvertisedControllerEndpoints(cfg)
	if len(eps) == 0 {
		return DynamicVoter{}, errors.New("storage format: no controller listeners found")
	}
	host := eps[0].Host
	dir, err := RandomUUID(opts.Rand)
	if err != nil {
		return DynamicVoter{}, err
	}
	return DynamicVoter{ID: cfg.NodeID, Host: host, Port: uint16(eps[0].Port), DirectoryID: dir}, nil
}

// AdvertisedControllerEndpoints are the controller listeners as a voter record
// names them (Kafka's effectiveAdvertisedControllerListeners): each listener of
// controller.listener.names, as advertised.listeners gives it when it names it,
// with host "localhost" for a listener that binds every interface.
func AdvertisedControllerEndpoints(cfg *Config) []Endpoint {
	var out []Endpoint
	for _, e := range cfg.ControllerEndpoints() {
		for _, a := range cfg.AdvertisedListeners {
			if a.Name == e.Name {
				e = a
			}
		}
		if e.Host == "" {
			e.Host = "localhost"
		}
		out = append(out, e)
	}
	return out
}

// MetadataDirectoryID is the directory.id of cfg's metadata log directory: with
// node.id, the replica key of a dynamic quorum's voter (KIP-853).
func MetadataDirectoryID(cfg *Config) (UUID, error) { return metadataDirectoryID(cfg) }

// directoryID is the directory.id of the metadata directory when this node is
// one of the initial voters: the one the voter set names.
func (q formatQuorum) directoryID(nodeID int32) (UUID, bool) {
	for _, v := range q.voters {
		if v.ID == nodeID {
			return v.DirectoryID, true
		}
	}
	return UUID{}, false
}

// kind is how Kafka's Formatter describes the metadata directory.
func (q formatQuorum) kind(nodeID int32) string {
	switch _, voter := q.directoryID(nodeID); {
	case q.voters == nil:
		return "metadata directory"
	case voter:
		return "dynamic metadata voter directory"
	default:
		return "dynamic metadata directory"
	}
}

// writeBootstrapSnapshot writes the 0-0 snapshot holding kraft.version 1 and
// the initial voters into metadataDir's __cluster_metadata-0, as Kafka's
// Formatter.writeDynamicQuorumSnapshot does. Every voter gets one endpoint on
// listenerName and the kraft.version range 0-1.
func (q formatQuorum) writeBootstrapSnapshot(metadataDir, listenerName string, now time.Time) error {
	nodes := make([]quorum.VoterNode, len(q.voters))
	for i, v := range q.voters {
		nodes[i] = quorum.VoterNode{
			Key:             quorum.ReplicaKey{ID: v.ID, DirectoryID: v.DirectoryID},
			Endpoints:       []quorum.Endpoint{{Name: listenerName, Host: v.Host, Port: v.Port}},
			KRaftVersionMin: quorum.KRaftVersionStatic,
			KRaftVersionMax: quorum.KRaftVersionDynamic,
		}
	}
	vs, err := quorum.NewVoterSet(nodes)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadInitialControllers, err)
	}
	data, err := quorum.BootstrapSnapshot(quorum.KRaftVersionDynamic, vs, now.UnixMilli())
	if err != nil {
		return err
	}
	if err := raftlog.WriteBootstrapSnapshot(filepath.Join(metadataDir, "__cluster_metadata-0"), data); err != nil {
		return fmt.Errorf("storage: writing the bootstrap snapshot: %w", err)
	}
	return nil
}
