package raftlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"go.uber.org/zap"
)

// RecoveryFile marks a node that `kraftd storage recover` repaired: it may have
// forgotten records it acknowledged or votes it granted, so until it has caught up
// with a leader it must not vote or stand for election (the recovery protocol of
// "Protocol-Aware Recovery for Consensus-Based Storage", FAST 2018). The quorum core
// enforces the rule (Loaded.Recovery) and the driver removes the file once the core
// says the node has caught up (ClearRecovery). kraftd's own file; Kafka ignores it.
const RecoveryFile = "kraftd-recovering"

// Recovery is the content of RecoveryFile.
type Recovery struct {
	// Epoch is E, the highest epoch in which the node may have voted: the largest of
	// its quorum-state's epoch, its log's epochs and its snapshots' epochs, as they
	// were before the repair cut anything. The node clears the marker only after it
	// has caught up with a leader of epoch >= Epoch, and then votes only in epochs
	// above it.
	Epoch int32
	// StateLost: the quorum-state file was missing or unreadable, so Epoch may be
	// below an epoch the node voted in; the node first learns the current epoch
	// from the other voters.
	StateLost bool
}

type recoveryJSON struct {
	Version   *int   `json:"version"`
	Epoch     *int64 `json:"epoch"`
	StateLost *bool  `json:"state_lost"`
}

// ErrBadRecoveryFile: RecoveryFile exists but cannot be read. The node refuses to
// start: without E it cannot tell which epochs it may vote in.
var ErrBadRecoveryFile = errors.New("raftlog: unreadable recovery marker")

func encodeRecovery(r Recovery) []byte {
	v, e, l := 1, int64(r.Epoch), r.StateLost
	b, _ := json.Marshal(recoveryJSON{Version: &v, Epoch: &e, StateLost: &l})
	return append(b, '\n')
}

func decodeRecovery(data []byte) (Recovery, error) {
	var js recoveryJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil {
		return Recovery{}, err
	}
	switch {
	case js.Version == nil || *js.Version != 1:
		return Recovery{}, errors.New("missing or unknown version")
	case js.Epoch == nil || *js.Epoch < 0 || *js.Epoch > 1<<31-1:
		return Recovery{}, errors.New("missing or out-of-range epoch")
	case js.StateLost == nil:
		return Recovery{}, errors.New("missing state_lost")
	}
	return Recovery{Epoch: int32(*js.Epoch), StateLost: *js.StateLost}, nil
}

// ReadRecovery reads dir's RecoveryFile: nil when there is none.
func ReadRecovery(dir string) (*Recovery, error) { return readRecovery(osFS{}, dir) }

func readRecovery(fsys FS, dir string) (*Recovery, error) {
	path := filepath.Join(dir, RecoveryFile)
	data, err := readFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ioErr(err)
	}
	r, err := decodeRecovery(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v; run `kraftd storage recover` [same flags] again to rewrite it",
			ErrBadRecoveryFile, path, err)
	}
	return &r, nil
}

// WriteRecovery makes r dir's RecoveryFile durably: tmp file, fsync, rename,
// directory fsync. Only then may anything the marker protects be cut.
func WriteRecovery(dir string, r Recovery) error { return writeRecovery(osFS{}, dir, r) }

func writeRecovery(fsys FS, dir string, r Recovery) error {
	if err := writeFileAtomicFS(fsys, dir, RecoveryFile, encodeRecovery(r)); err != nil {
		return err
	}
	return syncDirFS(fsys, dir)
}

// removeRecovery deletes dir's RecoveryFile durably (directory fsync).
func removeRecovery(fsys FS, dir string) error {
	if err := fsys.Remove(filepath.Join(dir, RecoveryFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ioErr(err)
	}
	return syncDirFS(fsys, dir)
}

// RecoveryClearer is a Storage that keeps a recovery marker. The driver calls
// ClearRecovery when the core reports the node caught up (Ready.RecoveryDone),
// after the Ready's appends are durable.
type RecoveryClearer interface {
	ClearRecovery() error
}

// ClearRecovery implements RecoveryClearer: RecoveryFile is removed and the
// directory fsynced.
func (s *FileStorage) ClearRecovery() error {
	if s.failed != nil {
		return s.failedErr()
	}
	if err := removeRecovery(s.fs, s.dir); err != nil {
		return s.fail(err)
	}
	s.recovery = nil
	return nil
}

// RecoverOptions tunes Recover.
type RecoverOptions struct {
	// UnsafeAcceptDataLoss repairs without a marker (and removes an existing one):
	// the node votes again at once, possibly a second time in an epoch it voted
	// in, and may help elect a leader that lacks records it acknowledged. The way
	// out when a majority of the voters is damaged at once.
	UnsafeAcceptDataLoss bool
	// CheckSnapshot validates a snapshot file (nil: snapshots are not checked). A
	// snapshot it refuses is dropped (renamed to *.checkpoint.corrupt).
	CheckSnapshot func(dir string, id SnapshotID) error
	// Logger receives what is cut. Nil means zap.NewNop().
	Logger *zap.Logger
	// File configures the storage opened for the repair.
	File FileOptions
}

// RecoverReport is what Recover did.
type RecoverReport struct {
	// Marker is the RecoveryFile written (nil with UnsafeAcceptDataLoss).
	Marker *Recovery
	// Actions lists, in order, every change made to the directory.
	Actions []string
	// EndOffset is the log end offset after the repair.
	EndOffset int64
}

// Recover repairs the partition directory dir of a stopped node that refused to
// start on damaged data (ErrCorrupt), as `kraftd storage recover` does. It first
// computes E (Recovery.Epoch) from everything still readable and makes the marker
// durable; only then it moves an unreadable quorum-state aside, drops snapshots
// CheckSnapshot refuses, and cuts the log at its first invalid batch (the rest of
// that segment and every later segment), lowering SyncedEndFile to the new end.
func Recover(dir string, opts RecoverOptions) (RecoverReport, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	opts.File.fillDefaults()
	fsys := opts.File.FS
	var rep RecoverReport
	if _, err := fsys.Stat(dir); err != nil {
		return rep, ioErr(err)
	}
	// A running node must not see its files change under it.
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return rep, err
	}
	defer lock.Close()
	stateEpoch, stateOK, err := readStateForRecovery(fsys, dir)
	if err != nil {
		return rep, err
	}
	epoch, logHasEpochs, err := highestEpochOnDisk(fsys, dir)
	if err != nil {
		return rep, err
	}
	epoch = max(epoch, stateEpoch)
	ranBefore, err := existsFS(fsys, filepath.Join(dir, SyncedEndFile))
	if err != nil {
		return rep, err
	}
	stateLost := !stateOK && (logHasEpochs || ranBefore)
	if old, err := readRecovery(fsys, dir); err == nil && old != nil {
		epoch, stateLost = max(epoch, old.Epoch), stateLost || old.StateLost
	}
	marker := Recovery{Epoch: epoch, StateLost: stateLost}
	if opts.UnsafeAcceptDataLoss {
		if err := removeRecovery(fsys, dir); err != nil {
			return rep, err
		}
		rep.Actions = append(rep.Actions, "no recovery marker (--unsafe-accept-data-loss): the node votes at once")
	} else {
		if err := writeRecovery(fsys, dir, marker); err != nil {
			return rep, err
		}
		rep.Marker = &marker
		rep.Actions = append(rep.Actions, fmt.Sprintf("wrote %s: epoch %d, quorum-state lost %t", RecoveryFile, epoch, stateLost))
	}
	if !stateOK {
		acts, err := replaceLostState(fsys, dir, epoch, opts.UnsafeAcceptDataLoss)
		rep.Actions = append(rep.Actions, acts...)
		if err != nil {
			return rep, err
		}
	}
	acts, err := dropBadSnapshots(fsys, dir, opts.CheckSnapshot)
	rep.Actions = append(rep.Actions, acts...)
	if err != nil {
		return rep, err
	}
	if len(acts) > 0 {
		// The log may start where a dropped snapshot ended: without it the node
		// would hold a log with no state below it. Fetch everything again.
		acts, err := dropLog(fsys, dir)
		rep.Actions = append(rep.Actions, acts...)
		if err != nil {
			return rep, err
		}
	}
	fo := opts.File
	fo.Logger = opts.Logger
	fo.repair = func(what string) { rep.Actions = append(rep.Actions, what) }
	fo.locked = true
	s, err := OpenFileStorage(dir, fo)
	if err != nil {
		return rep, err
	}
	rep.EndOffset = s.EndOffset()
	return rep, s.Close()
}

// readStateForRecovery returns the quorum-state's epoch; ok is false when the file
// is missing or unreadable.
func readStateForRecovery(fsys FS, dir string) (epoch int32, ok bool, err error) {
	data, err := readFile(fsys, filepath.Join(dir, QuorumStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, ioErr(err)
	}
	st, derr := DecodeQuorumState(data)
	if derr != nil {
		return 0, false, nil
	}
	return max(st.LeaderEpoch, 0), true, nil
}

// highestEpochOnDisk is the largest epoch the directory still shows: the valid
// prefix of every segment (each scanned on its own, so a damaged segment hides only
// its own tail), leader-epoch-checkpoint and the snapshot names. any: some batch or
// snapshot exists (the node took part in the quorum).
func highestEpochOnDisk(fsys FS, dir string) (epoch int32, any bool, err error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, false, ioErr(err)
	}
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok {
			res, err := scanSegment(fsys, filepath.Join(dir, name), base, -1)
			if err != nil {
				return 0, false, err
			}
			for _, b := range res.Batches {
				epoch, any = max(epoch, b.Epoch), true
			}
			any = any || res.Total > 0
		}
		if id, ok := parseSnapshotName(name); ok {
			epoch, any = max(epoch, id.Epoch), true
		}
	}
	if data, err := readFile(fsys, filepath.Join(dir, LeaderEpochCheckpointFile)); err == nil {
		if cp, err := DecodeEpochCheckpoint(data); err == nil {
			for _, c := range cp {
				epoch = max(epoch, c.Epoch)
			}
		}
	}
	return epoch, any, nil
}

// replaceLostState moves an unreadable quorum-state aside (quorum-state.corrupt).
// With unsafe, it writes a state at epoch with no vote, so that the node starts at
// once; otherwise the node starts without one, which the marker allows.
func replaceLostState(fsys FS, dir string, epoch int32, unsafe bool) ([]string, error) {
	var acts []string
	path := filepath.Join(dir, QuorumStateFile)
	if _, err := fsys.Stat(path); err == nil {
		if err := fsys.Rename(path, path+corruptSuffix); err != nil {
			return acts, ioErr(err)
		}
		acts = append(acts, fmt.Sprintf("moved the unreadable %s to %s", QuorumStateFile, QuorumStateFile+corruptSuffix))
	}
	if unsafe {
		data, err := EncodeQuorumState(QuorumState{LeaderID: -1, LeaderEpoch: epoch, VotedID: -1})
		if err != nil {
			return acts, err
		}
		if err := writeFileAtomicFS(fsys, dir, QuorumStateFile, data); err != nil {
			return acts, err
		}
		acts = append(acts, fmt.Sprintf("wrote a %s at epoch %d with no vote", QuorumStateFile, epoch))
	}
	return acts, syncDirFS(fsys, dir)
}

const corruptSuffix = ".corrupt"

// dropBadSnapshots renames every snapshot check refuses to *.checkpoint.corrupt.
func dropBadSnapshots(fsys FS, dir string, check func(string, SnapshotID) error) ([]string, error) {
	if check == nil {
		return nil, nil
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, ioErr(err)
	}
	var acts []string
	for _, name := range names {
		id, ok := parseSnapshotName(name)
		if !ok {
			continue
		}
		cerr := check(dir, id)
		if cerr == nil {
			continue
		}
		path := filepath.Join(dir, name)
		if err := fsys.Rename(path, path+corruptSuffix); err != nil {
			return acts, ioErr(err)
		}
		acts = append(acts, fmt.Sprintf("dropped snapshot %s (moved to %s): %v", name, name+corruptSuffix, cerr))
	}
	if len(acts) > 0 {
		return acts, syncDirFS(fsys, dir)
	}
	return acts, nil
}

// dropLog deletes every segment: the node starts at its newest valid snapshot (or
// empty) and fetches the rest from the leader.
func dropLog(fsys FS, dir string) ([]string, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, ioErr(err)
	}
	var acts []string
	for _, name := range names {
		if _, ok := parseSegmentName(name); !ok {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
			return acts, ioErr(err)
		}
		acts = append(acts, "deleted "+name+": the log is fetched again from the leader")
	}
	return acts, syncDirFS(fsys, dir)
}
