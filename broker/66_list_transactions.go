package broker

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/protocol"
)

// ListTransactions: v0-v2 (KIP-664; v1 DurationFilterMillis, KIP-994; v2
// TransactionalIDPattern, an RE2 expression as Kafka's re2j reads it), for
// operators finding hanging transactions: the transactional ids this
// broker coordinates, filtered by state names, producer ids, running time
// and id pattern. Unknown state names come back in UnknownStateFilters (and
// filters that are all unknown match nothing); a bad pattern is
// INVALID_REQUEST; while a partition loads, COORDINATOR_LOAD_IN_PROGRESS.
func (c *ClientAPI) handleListTransactions(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.ListTransactionsRequest)
	resp := body.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{MinDurationMs: -1}
	if body.Version >= 1 {
		f.MinDurationMs = body.DurationFilterMillis
	}
	if len(body.StateFilters) > 0 {
		f.States = map[txn.State]bool{}
		for _, name := range body.StateFilters {
			if s, ok := txn.StateNamed(name); ok {
				f.States[s] = true
			} else {
				resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			}
		}
		if len(f.States) == 0 {
			return resp, nil
		}
	}
	if len(body.ProducerIDFilters) > 0 {
		f.ProducerIDs = map[int64]bool{}
		for _, pid := range body.ProducerIDFilters {
			f.ProducerIDs[pid] = true
		}
	}
	if body.Version >= 2 && body.TransactionalIDPattern != nil && *body.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*body.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		f.Match = re.MatchString
	}
	listed, err := c.txns.List(f, time.Now().UnixMilli())
	if err != nil {
		resp.ErrorCode = err.Code
		return resp, nil
	}
	slices.SortFunc(listed, func(a, b txn.Listed) int {
		switch {
		case a.TransactionalID < b.TransactionalID:
			return -1
		case a.TransactionalID > b.TransactionalID:
			return 1
		}
		return 0
	})
	for _, l := range listed {
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = l.TransactionalID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}

func sortedStrings(s []string) []string { slices.Sort(s); return s }
func sortedInt32s(s []int32) []int32    { slices.Sort(s); return s }
