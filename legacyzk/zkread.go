package legacyzk

import (
	"context"
	"errors"
	"sync"
)

// getResult is one pipelined getData answer.
type getResult struct {
	data []byte
	stat Stat
	err  error
}

// getAll reads every path with at most maxInFlight requests outstanding on
// the one session, as Kafka's ZooKeeperClient.handleRequests does with its
// in-flight semaphore (zookeeper.max.in.flight.requests). There is no
// multi-read in ZooKeeper: each znode is its own getData. Results are in
// path order.
func getAll(ctx context.Context, st Store, paths []string, watch bool, maxInFlight int) []getResult {
	out := make([]getResult, len(paths))
	if maxInFlight < 1 {
		maxInFlight = 1
	}
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d, s, err := st.Get(ctx, p, watch)
			out[i] = getResult{data: d, stat: s, err: err}
		})
	}
	wg.Wait()
	return out
}

// multiAll runs one Multi per entry with at most maxInFlight outstanding.
func multiAll(ctx context.Context, st Store, batches [][]Op, maxInFlight int) ([][]OpResult, []error) {
	res := make([][]OpResult, len(batches))
	errs := make([]error, len(batches))
	if maxInFlight < 1 {
		maxInFlight = 1
	}
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	for i, ops := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res[i], errs[i] = st.Multi(ctx, ops...)
		})
	}
	wg.Wait()
	return res, errs
}

// epochCheckFailed reports whether err is a failed CheckOp on
// /controller_epoch at op index 0: the controller has been fenced.
func epochCheckFailed(err error) bool {
	var me *MultiError
	return errors.As(err, &me) && me.Index == 0 && me.Path == ControllerEpochPath
}
