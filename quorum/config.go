package quorum

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"go.uber.org/zap"
)

// Config configures a Raft core. Validate fills in defaults; timing fields are in
// milliseconds and take Kafka's defaults when zero (negative values are rejected).
type Config struct {
	// NodeID is this node's id (node.id). Required, >= 0.
	NodeID int32
	// ClusterID is checked on every inbound request; "" disables the check.
	ClusterID string
	// Voters is the static voter set (controller.quorum.voters). A NodeID not in it makes
	// this node an observer: it fetches but never votes or campaigns. Empty makes it an
	// observer that knows the controllers only by address
	// (controller.quorum.bootstrap.servers): its discovery Fetches go to AnyVoter and it
	// follows whichever leader the answers name.
	Voters []int32

	// ElectionTimeoutMs is controller.quorum.election.timeout.ms (1000). The effective
	// timeout is uniform in [T, 2T) so that voters rarely campaign at the same moment.
	ElectionTimeoutMs int64
	// FetchTimeoutMs is controller.quorum.fetch.timeout.ms (2000): a voter that has not
	// fetched successfully for this long campaigns; the leader resigns after 1.5x this
	// without fetches from a majority (check-quorum).
	FetchTimeoutMs int64
	// ElectionBackoffMaxMs is controller.quorum.election.backoff.max.ms (1000).
	ElectionBackoffMaxMs int64
	// AppendLingerMs is controller.quorum.append.linger.ms (25). In Kafka it is how
	// long the leader lets writes accumulate before it appends and flushes them. Here
	// it is the upper bound of that wait: the leader appends a proposal at once when
	// no earlier append is in flight and gathers proposals only while one is (being
	// fsynced or not yet committed), appending them as one batch when it completes
	// (group commit, see Propose), or when they have waited this long. Zero means the default; AppendLingerMsNone
	// makes every Propose drain at once, fsync in flight or not.
	AppendLingerMs int64
	// RequestTimeoutMs is controller.quorum.request.timeout.ms (2000). The driver times
	// out outbound requests; the core uses it to pace EndQuorumEpoch retries.
	RequestTimeoutMs int64
	// RetryBackoffMs is controller.quorum.retry.backoff.ms (20): wait after a failed Fetch.
	RetryBackoffMs int64
	// FetchMaxWaitMs is the long-poll time a fetcher asks for (Kafka's constant 500).
	FetchMaxWaitMs int32
	// MaxBatchBytes caps one appended batch (8 MiB).
	MaxBatchBytes int
	// FetchMaxBytes caps one Fetch response's records (8 MiB); at least one batch is sent.
	FetchMaxBytes int32
	// MaxTrackedObservers caps the observers a leader tracks (DefaultMaxTrackedObservers);
	// see noteFetcher. Zero means the default.
	MaxTrackedObservers int
	// MaxSnapshotBytes caps the size of a snapshot this node downloads
	// (DefaultMaxSnapshotBytes); zero means the default. See handleFetchSnapshotResponse.
	MaxSnapshotBytes int64

	// DirectoryID is the directory.id of this node's metadata log directory
	// (meta.properties): with Voters empty (a dynamic quorum, KIP-853) this node is
	// a voter only if the voter set in force names this id with this directory id.
	// The zero UUID matches any.
	DirectoryID [16]byte
	// Endpoints are this node's advertised controller listeners, the first the
	// default one. A voter with endpoints reports them to the leader through
	// UpdateRaftVoter (KIP-853); nil never sends one.
	Endpoints []Endpoint
	// FollowersAlwaysFlush makes this node fsync what it fetches while it is not a
	// voter too (Kafka's KafkaRaftClient followersAlwaysFlush, true on controllers).
	// An observer that may be added as a voter needs it: once the leader appends the
	// VotersRecord that adds it, the offset it last fetched counts toward the high
	// watermark, so that offset must already be durable. Broker-only nodes leave it
	// off: their offsets never count.
	FollowersAlwaysFlush bool

	// KRaftVersion is the kraft.version feature level. Only 0, the static voter set of
	// controller.quorum.voters, is implemented; Validate rejects any other. At 0 the
	// voter-only requests (Vote, BeginQuorumEpoch, EndQuorumEpoch) are checked against
	// the voter set (voterSetError), as Kafka 3.7 does.
	KRaftVersion int16

	// DisablePreVote turns KIP-996 pre-vote off (it is on by default). Pre-vote is also
	// skipped while any voter is known not to support Vote v2 (SetPeerSupportsPreVote).
	DisablePreVote bool

	// Rand drives election jitter, backoff and bootstrap choice. Required for
	// determinism; nil gets a generator seeded from NodeID.
	Rand *rand.Rand
	// Logger receives state transitions at info and per-request lines at debug.
	Logger *zap.Logger

	// Snapshots reads local snapshot files to serve FetchSnapshot; nil serves none
	// (every FetchSnapshot gets SNAPSHOT_NOT_FOUND).
	Snapshots SnapshotSource

	// lingerAlways restores the linger-only batching that group commit replaced
	// (every proposal waits AppendLingerMs, idle log or not). Benchmarks only: they
	// measure group commit against it in the same run.
	lingerAlways bool
	// groupLocal makes group commit wait only for the leader's own fsync, not for
	// the commit (see appendIdle). Benchmarks only, to show why it waits for both.
	groupLocal bool
}

// DefaultMaxSnapshotBytes is the largest snapshot a follower downloads: 1 GiB,
// about 13 times the snapshot of a million partitions (75 MB). The follower's driver
// holds a download in memory as it arrives (and writes it to the partial file) and
// its listeners load the whole snapshot, so a larger one could not be loaded either.
const DefaultMaxSnapshotBytes = 1 << 30

// AppendLingerMsNone as Config.AppendLingerMs makes every Propose drain at once.
const AppendLingerMsNone = -1

// Validate checks c and fills in defaults. Returned errors wrap ErrInvalidConfig.
func (c *Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("%w: node id %d", ErrInvalidConfig, c.NodeID)
	}
	if c.KRaftVersion != 0 {
		return fmt.Errorf("%w: kraft.version %d (only 0, a static voter set, is implemented)", ErrInvalidConfig, c.KRaftVersion)
	}
	seen := map[int32]bool{}
	for _, v := range c.Voters {
		if v < 0 || seen[v] {
			return fmt.Errorf("%w: voter id %d negative or repeated", ErrInvalidConfig, v)
		}
		seen[v] = true
	}
	c.Voters = slices.Sorted(slices.Values(c.Voters))
	for _, f := range []struct {
		name string
		v    *int64
		def  int64
	}{
		{"election timeout", &c.ElectionTimeoutMs, 1000},
		{"fetch timeout", &c.FetchTimeoutMs, 2000},
		{"election backoff max", &c.ElectionBackoffMaxMs, 1000},
		{"request timeout", &c.RequestTimeoutMs, 2000},
		{"retry backoff", &c.RetryBackoffMs, 20},
	} {
		if *f.v < 0 {
			return fmt.Errorf("%w: %s %d ms", ErrInvalidConfig, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case c.AppendLingerMs == 0:
		c.AppendLingerMs = 25
	case c.AppendLingerMs < AppendLingerMsNone:
		return fmt.Errorf("%w: append linger %d ms", ErrInvalidConfig, c.AppendLingerMs)
	}
	if c.FetchMaxWaitMs == 0 {
		c.FetchMaxWaitMs = 500
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 8 << 20
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = 8 << 20
	}
	if c.MaxSnapshotBytes <= 0 {
		c.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if c.MaxTrackedObservers <= 0 {
		c.MaxTrackedObservers = DefaultMaxTrackedObservers
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(uint64(c.NodeID), 0x6b72616674))
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// isVoter reports whether id is in the static voter set.
func (c *Config) isVoter(id int32) bool {
	_, ok := slices.BinarySearch(c.Voters, id)
	return ok
}

// majority is the number of voters that make a quorum.
func (c *Config) majority() int { return len(c.Voters)/2 + 1 }
