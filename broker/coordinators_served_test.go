package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// Register serves what ClientAPIVersions lists for each coordinator
// combination (zk-legacy advertises the latter before the former exists):
// with both coordinators, the group and transaction APIs and
// FindCoordinator; with the transaction coordinator Disabled (as zk-legacy
// runs it), no transaction APIs, and FindCoordinator and InitProducerId
// answer a transactional id without creating __transaction_state; with
// both Disabled, no FindCoordinator, while the partition side of
// transactions (WriteTxnMarkers, DescribeProducers) is served.
func TestClientAPICoordinatorsServed(t *testing.T) {
	for _, tc := range []struct {
		name          string
		groups, txns  bool
		want, notWant []int16
	}{
		{"both", true, true, []int16{8, 10, 24, 25, 26, 27, 61, 65, 66}, nil},
		{"groups only", true, false, []int16{8, 10, 27, 61}, []int16{24, 25, 26, 65, 66}},
		{"zk-legacy", false, false, []int16{27, 61}, []int16{8, 10, 24, 25, 26, 65, 66}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := &recordingAdmin{}
			c := newTestClientAPI(t, admin, func(cfg *ClientAPIConfig) {
				cfg.Replicas, cfg.ProducerIDs = newTestReplicas(t), &countingProducerIDs{}
				cfg.Groups.Disabled, cfg.Txns.Disabled = !tc.groups, !tc.txns
			})
			reg := protocol.NewRegistry()
			c.Register(reg)
			var listed, served []int16
			for _, v := range ClientAPIVersions(true, tc.groups, tc.txns, nil) {
				listed = append(listed, v.ApiKey)
				if minV, maxV, _, ok := reg.Lookup(v.ApiKey); !ok || minV != v.MinVersion || maxV != v.MaxVersion {
					t.Errorf("API %d listed v%d-v%d, served v%d-v%d (%v)", v.ApiKey, v.MinVersion, v.MaxVersion, minV, maxV, ok)
				}
			}
			for key := range int16(100) {
				if _, _, _, ok := reg.Lookup(key); ok && key != 18 { // the registry's own ApiVersions
					served = append(served, key)
				}
			}
			slices.Sort(listed)
			if !slices.Equal(listed, served) {
				t.Fatalf("served %v, listed %v", served, listed)
			}
			for _, k := range tc.want {
				if !slices.Contains(served, k) {
					t.Errorf("API %d not served", k)
				}
			}
			for _, k := range tc.notWant {
				if slices.Contains(served, k) {
					t.Errorf("API %d served", k)
				}
			}
			if !tc.groups || tc.txns {
				return
			}
			_, _, find, _ := reg.Lookup(10)
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.SetVersion(4)
			fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"tx"}
			r := call(t, find, fc).(*kmsg.FindCoordinatorResponse)
			if len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("FindCoordinator for a transactional id: %+v", r.Coordinators)
			}
			_, _, initPID, _ := reg.Lookup(22)
			ip := kmsg.NewPtrInitProducerIDRequest()
			ip.SetVersion(4)
			ip.TransactionalID = kmsg.StringPtr("tx")
			if r := call(t, initPID, ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.NotCoordinator.Code {
				t.Fatalf("InitProducerId with a transactional id: error %d", r.ErrorCode)
			}
			c.Close()
			admin.mu.Lock()
			defer admin.mu.Unlock()
			if len(admin.created) != 0 {
				t.Fatalf("created %v without a transaction coordinator", admin.created)
			}
		})
	}
}
