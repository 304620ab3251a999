package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// MetaPropertiesFile is the file kafka-storage.sh format writes in every log
// directory.
const MetaPropertiesFile = "meta.properties"

// MetaProperties is the content of meta.properties, version 1 (KIP-631):
// version=1, cluster.id, node.id and directory.id (KIP-858). Version 0, from
// the ZooKeeper era, used broker.id; kraftd reads it but never writes it.
type MetaProperties struct {
	Version     int
	ClusterID   string
	NodeID      int32
	DirectoryID string
}

// Encode renders the file exactly as Kafka's PropertiesUtils does: a blank
// comment, a date comment, then key=value lines sorted by key.
func (m MetaProperties) Encode(now time.Time) []byte {
	props := map[string]string{
		"version":    strconv.Itoa(m.Version),
		"cluster.id": m.ClusterID,
	}
	if m.Version == 0 {
		props["broker.id"] = strconv.Itoa(int(m.NodeID))
	} else {
		props["node.id"] = strconv.Itoa(int(m.NodeID))
	}
	if m.DirectoryID != "" {
		props["directory.id"] = m.DirectoryID
	}
	return StoreProperties(props, now)
}

// ReadMetaProperties reads dir/meta.properties. A missing file (or missing
// directory) is ErrNotFormatted.
func ReadMetaProperties(dir string) (MetaProperties, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return MetaProperties{}, fmt.Errorf("%w: %s", ErrNotFormatted, dir)
	}
	if err != nil {
		return MetaProperties{}, fmt.Errorf("%w: %w", ErrBadMetaProperties, err)
	}
	defer f.Close()
	props, err := ParseProperties(f)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("%w: %s: %w", ErrBadMetaProperties, path, err)
	}
	return decodeMetaProperties(path, props)
}

func decodeMetaProperties(path string, props []Property) (MetaProperties, error) {
	kv := make(map[string]string, len(props))
	for _, p := range props {
		kv[p.Key] = p.Value
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s: %s", ErrBadMetaProperties, path, what) }
	m := MetaProperties{ClusterID: kv["cluster.id"], DirectoryID: kv["directory.id"]}
	switch kv["version"] {
	case "", "0":
		m.Version = 0
	case "1":
		m.Version = 1
	default:
		return MetaProperties{}, bad(fmt.Sprintf("unknown version %q", kv["version"]))
	}
	idKey := "node.id"
	if m.Version == 0 {
		idKey = "broker.id"
	}
	id, err := strconv.ParseInt(kv[idKey], 10, 32)
	if err != nil {
		return MetaProperties{}, bad(fmt.Sprintf("%s %q is not an integer", idKey, kv[idKey]))
	}
	m.NodeID = int32(id)
	if m.Version == 1 && m.ClusterID == "" {
		return MetaProperties{}, bad("cluster.id was not found")
	}
	if m.DirectoryID != "" {
		if _, err := ParseUUID(m.DirectoryID); err != nil {
			return MetaProperties{}, bad("directory.id: " + err.Error())
		}
	}
	return m, nil
}

// WriteMetaProperties writes dir/meta.properties durably: a temporary file
// that is fsynced, renamed over the target, and the directory fsynced, so a
// crash leaves either the old file or the new one, never half of one.
func WriteMetaProperties(dir string, m MetaProperties, now time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	path := filepath.Join(dir, MetaPropertiesFile)
	tmp := path + ".tmp"
	if err := writeSynced(tmp, m.Encode(now)); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("storage: %w", err)
	}
	return syncDir(dir)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("storage: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("storage: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

// FormatOptions tunes Format.
type FormatOptions struct {
	// ClusterID to write; must parse as a UUID.
	ClusterID string
	// IgnoreFormatted skips directories that already hold meta.properties
	// instead of failing, like kafka-storage.sh --ignore-formatted.
	IgnoreFormatted bool
	// Out receives the "Formatting ..." lines; nil discards them.
	Out io.Writer
	// Now stamps the date comment; nil means time.Now.
	Now func() time.Time
	// Rand draws directory ids; nil means crypto/rand.
	Rand io.Reader

	// Standalone formats this controller as the single voter of a new dynamic
	// quorum (KIP-853; kafka-storage.sh --standalone).
	Standalone bool
	// InitialControllers is the initial voter set of a new dynamic quorum,
	// id@host:port:directory-id,... (--initial-controllers); every node is
	// formatted with the same list.
	InitialControllers string
	// NoInitialControllers formats a controller of a dynamic quorum that joins
	// later through AddRaftVoter (--no-initial-controllers).
	NoInitialControllers bool
}

// Format writes meta.properties into every log directory and the metadata
// directory of cfg, each with its own random directory.id, as
// `kafka-storage.sh format` does. Formatted directories are checked against
// the cluster and node id first, and refused unless IgnoreFormatted is set.
//
// With Standalone or InitialControllers (a dynamic quorum, KIP-853) it also
// writes the bootstrap snapshot __cluster_metadata-0/00000000000000000000-
// 0000000000.checkpoint (kraft.version 1 and the initial voter set) into the
// metadata directory, whose directory.id is then the one the voter set gives
// this node. bootstrap.checkpoint is not written: kraftd bootstraps
// metadata.version DefaultMetadataVersion when the metadata log is empty.
func Format(cfg *Config, opts FormatOptions) error {
	if _, err := ParseUUID(opts.ClusterID); err != nil {
		return badValue("cluster.id", opts.ClusterID, "is not a base64-encoded 16-byte UUID")
	}
	st, err := inspect(cfg)
	if err != nil {
		return err
	}
	if err := st.verify(opts.ClusterID, cfg.NodeID); err != nil {
		return err
	}
	if len(st.formatted) > 0 && !opts.IgnoreFormatted {
		return fmt.Errorf("%w: %s; use --ignore-formatted to ignore this directory and format the others",
			ErrAlreadyFormatted, st.formatted[0])
	}
	if len(st.empty) == 0 {
		fprintf(opts.Out, "All of the log directories are already formatted.\n")
		return nil
	}
	q, err := planQuorum(cfg, opts)
	if err != nil {
		return err
	}
	return formatDirs(cfg, st.empty, opts, q)
}

func formatDirs(cfg *Config, dirs []string, opts FormatOptions, q formatQuorum) error {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	used := make(map[UUID]bool)
	for _, dir := range dirs {
		dirID, err := RandomUUID(opts.Rand)
		if err != nil {
			return err
		}
		kind := "data directory"
		if dir == cfg.MetadataDir() {
			kind = q.kind(cfg.NodeID)
			if voterDir, ok := q.directoryID(cfg.NodeID); ok {
				dirID = voterDir
			}
		}
		if used[dirID] {
			return fmt.Errorf("storage: directory id %s repeated", dirID)
		}
		used[dirID] = true
		fprintf(opts.Out, "Formatting %s %s with metadata.version %s.\n", kind, dir, DefaultMetadataVersion)
		if dir == cfg.MetadataDir() && q.voters != nil {
			// Before meta.properties: a directory without it is unformatted, so a
			// failure here leaves nothing that a node would start from.
			if err := q.writeBootstrapSnapshot(dir, cfg.ControllerListenerNames[0], now()); err != nil {
				return err
			}
		}
		m := MetaProperties{Version: 1, ClusterID: opts.ClusterID, NodeID: cfg.NodeID, DirectoryID: dirID.String()}
		if err := WriteMetaProperties(dir, m, now()); err != nil {
			return err
		}
	}
	return nil
}

// storageState is what inspect found in cfg's directories.
type storageState struct {
	formatted []string
	empty     []string
	props     map[string]MetaProperties
}

func inspect(cfg *Config) (storageState, error) {
	st := storageState{props: make(map[string]MetaProperties)}
	for _, dir := range cfg.AllLogDirs() {
		m, err := ReadMetaProperties(dir)
		switch {
		case errors.Is(err, ErrNotFormatted):
			st.empty = append(st.empty, dir)
		case err != nil:
			return storageState{}, err
		default:
			st.formatted = append(st.formatted, dir)
			st.props[dir] = m
		}
	}
	return st, nil
}

// clusterID is the cluster id of the formatted directories ("" if none).
func (st storageState) clusterID() string {
	for _, dir := range st.formatted {
		return st.props[dir].ClusterID
	}
	return ""
}

// verify checks every formatted directory against the expected cluster id
// ("" means: whatever the first formatted directory says) and node id, and
// that no two directories share a directory.id.
func (st storageState) verify(clusterID string, nodeID int32) error {
	if clusterID == "" {
		clusterID = st.clusterID()
	}
	seen := make(map[string]string)
	for _, dir := range st.formatted {
		m := st.props[dir]
		if m.ClusterID != clusterID {
			return fmt.Errorf("%w: %s is formatted for cluster id %s, but this node is configured with "+
				"cluster id %s", ErrClusterIDMismatch, filepath.Join(dir, MetaPropertiesFile), m.ClusterID, clusterID)
		}
		if m.NodeID != nodeID {
			return fmt.Errorf("%w: %s is formatted for node id %d, but this node is configured with node id %d; "+
				"if you moved your data, make sure the configured node.id matches", ErrNodeIDMismatch,
				filepath.Join(dir, MetaPropertiesFile), m.NodeID, nodeID)
		}
		if other, dup := seen[m.DirectoryID]; dup && m.DirectoryID != "" {
			return fmt.Errorf("%w: %s and %s share directory.id %s", ErrBadMetaProperties, other, dir, m.DirectoryID)
		}
		seen[m.DirectoryID] = dir
	}
	return nil
}

// PrepareStorage makes sure every directory of cfg is formatted for this
// node before it starts, and returns the cluster id:
//   - formatted directories must agree with cfg.ClusterID (when set) and
//     cfg.NodeID;
//   - unformatted directories are formatted when a cluster id is known,
//     from cfg.ClusterID or a formatted sibling;
//   - otherwise it fails with ErrNotFormatted, naming `kraftd storage format`.
func PrepareStorage(cfg *Config) (string, error) {
	st, err := inspect(cfg)
	if err != nil {
		return "", err
	}
	if err := st.verify(cfg.ClusterID, cfg.NodeID); err != nil {
		return "", err
	}
	clusterID := cfg.ClusterID
	if clusterID == "" {
		clusterID = st.clusterID()
	}
	if len(st.empty) == 0 {
		return clusterID, nil
	}
	if clusterID == "" {
		return "", fmt.Errorf("%w: %s; run `kraftd storage format --cluster-id $(kraftd storage random-uuid) "+
			"[same flags]` first, or start with --cluster-id ID", ErrNotFormatted, st.empty[0])
	}
	err = formatDirs(cfg, st.empty, FormatOptions{ClusterID: clusterID, Out: cfg.Out, Rand: cfg.Rand}, formatQuorum{})
	return clusterID, err
}

// StorageFormatted reports whether any directory of cfg is formatted, so
// main can decide to mint a fresh cluster id for the embedded default.
func StorageFormatted(cfg *Config) (bool, error) {
	st, err := inspect(cfg)
	if err != nil {
		return false, err
	}
	return len(st.formatted) > 0, nil
}

func fprintf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// RecoverOptions tunes RecoverStorage.
type RecoverOptions struct {
	// UnsafeAcceptDataLoss repairs without a recovery marker: the node votes at
	// once (raftlog.RecoverOptions.UnsafeAcceptDataLoss).
	UnsafeAcceptDataLoss bool
	// Out receives what was done; nil discards it.
	Out io.Writer
}

// RecoverStorage repairs the metadata log of a stopped node that refused to start
// on damaged data, as `kraftd storage recover` does (raftlog.Recover): a marker
// holding the highest epoch the node may have voted in is made durable first, then
// an unreadable quorum-state is moved aside, snapshots that do not parse are
// dropped and the log is cut at its first invalid batch. The node then rejoins
// without voting or campaigning until it has caught up with a leader.
func RecoverStorage(cfg *Config, opts RecoverOptions) error {
	st, err := inspect(cfg)
	if err != nil {
		return err
	}
	if err := st.verify(cfg.ClusterID, cfg.NodeID); err != nil {
		return err
	}
	meta := cfg.MetadataDir()
	if _, ok := st.props[meta]; !ok {
		return fmt.Errorf("%w: %s; there is nothing to recover", ErrNotFormatted, meta)
	}
	dir := filepath.Join(meta, "__cluster_metadata-0")
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("storage: %s: %w; there is nothing to recover", dir, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	rep, err := raftlog.Recover(dir, raftlog.RecoverOptions{
		UnsafeAcceptDataLoss: opts.UnsafeAcceptDataLoss,
		CheckSnapshot:        checkSnapshotFile,
		Logger:               logger,
		File:                 metadataLogOptions(cfg, logger),
	})
	for _, a := range rep.Actions {
		fprintf(opts.Out, "%s\n", a)
	}
	if err != nil {
		return fmt.Errorf("storage: recovering %s: %w", dir, err)
	}
	fprintf(opts.Out, "Recovered %s: the log ends at offset %d.\n", dir, rep.EndOffset)
	if rep.Marker != nil {
		fprintf(opts.Out, "Until it has caught up with a leader of epoch %d or later, the node grants no vote and "+
			"does not stand for election; it then votes only in epochs above %d. If a majority of the voters needs "+
			"recovery at once the quorum stays unavailable: --unsafe-accept-data-loss is the way out.\n",
			rep.Marker.Epoch, rep.Marker.Epoch)
	}
	return nil
}

// checkSnapshotFile parses a snapshot file completely (header, batches and their
// CRCs, footer), as the node does when it loads one.
func checkSnapshotFile(dir string, id raftlog.SnapshotID) error {
	data, err := os.ReadFile(filepath.Join(dir, raftlog.SnapshotFileName(id)))
	if err != nil {
		return err
	}
	_, err = quorum.ParseSnapshot(id, data)
	return err
}
