package broker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite testdata/fuzz/<Target>/seed-* from the fuzz targets' seeds")

// echoAdmin answers every admin request with success per topic, or fails
// it when fail is set: the two outcomes a forwarding broker sees.
type echoAdmin struct{ fail bool }

var errAdminFuzz = errors.New("fuzz: admin failed")

func (a echoAdmin) CreateTopics(_ context.Context, req *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, error) {
	if a.fail {
		return nil, errAdminFuzz
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, t.NumPartitions, t.ReplicationFactor
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (a echoAdmin) DeleteTopics(_ context.Context, req *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, error) {
	if a.fail {
		return nil, errAdminFuzz
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, n := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(n)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (a echoAdmin) CreatePartitions(_ context.Context, req *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, error) {
	if a.fail {
		return nil, errAdminFuzz
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (a echoAdmin) ElectLeaders(_ context.Context, req *kmsg.ElectLeadersRequest) (*kmsg.ElectLeadersResponse, error) {
	if a.fail {
		return nil, errAdminFuzz
	}
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// FuzzClientAPI decodes arbitrary bytes as any client API request the
// broker's ClientAPI serves (Metadata, CreateTopics, DeleteTopics,
// DescribeConfigs, CreatePartitions, DescribeCluster, ElectLeaders), at any version its
// registry accepts, and runs the registered handler against a cached image
// (brokers 1 and 2, topic foo) with auto-creation on. Byte 0 picks the API,
// byte 1 the version, byte 2 whether the admin fails; the rest is the body.
// Invariants: no panic, and a decoded request gets an answer of its own kind.
func FuzzClientAPI(f *testing.F) {
	apis := []int16{3, 19, 20, 32, 37, 60, 43}
	seeds := clientAPISeeds(apis)
	if *writeCorpus {
		dir := filepath.Join("testdata", "fuzz", "FuzzClientAPI")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				f.Fatal(err)
			}
		}
	}
	for _, s := range seeds {
		f.Add(s)
	}
	img := legacyImage(f)
	clients := map[bool]*ClientAPI{}
	for _, fail := range []bool{false, true} {
		c, err := NewClientAPI(ClientAPIConfig{NodeID: 1, ClusterID: testCluster, Metadata: staticSource{img},
			Admin: echoAdmin{fail: fail}, AutoCreateTopicsEnable: true,
			StaticConfigs: []StaticConfig{{Name: "num.partitions", Value: "1", Type: kmsg.ConfigTypeInt}}})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(c.Close)
		clients[fail] = c
	}
	regs := map[bool]*protocol.Registry{false: protocol.NewRegistry(), true: protocol.NewRegistry()}
	for fail, r := range regs {
		clients[fail].Register(r)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		key := apis[int(data[0])%len(apis)]
		r := regs[data[2]&1 == 1]
		minV, maxV, h, ok := r.Lookup(key)
		if !ok {
			t.Fatalf("key %d not registered", key)
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(minV + int16(int(data[1])%int(maxV-minV+1)))
		if err := req.ReadFrom(data[3:]); err != nil {
			return
		}
		resp, err := h(context.Background(), &protocol.Request{Key: key, Version: req.GetVersion(), Body: req, Listener: "PLAINTEXT"})
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		if resp == nil || resp.Key() != key {
			t.Fatalf("%T answered with %T", req, resp)
		}
	})
}

// clientAPISeeds are one request per API, plus issue 12's huge counts.
func clientAPISeeds(apis []int16) [][]byte {
	in := func(req kmsg.Request, fail bool) []byte {
		i := 0
		for apis[i] != req.Key() {
			i++
		}
		flag := byte(0)
		if fail {
			flag = 1
		}
		return append([]byte{byte(i), byte(req.GetVersion()), flag}, req.AppendTo(nil)...)
	}
	var out [][]byte
	out = append(out, in(metadataRequest(12, "foo", "new-topic"), false))
	md := metadataRequest(4)
	md.Topics = nil
	out = append(out, in(md, false))
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge", math.MaxInt32, 3
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	out = append(out, in(ct, false), in(ct, true))
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TopicNames = 4, []string{"foo"}
	out = append(out, in(dt, false))
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeBroker, "1"}, {kmsg.ConfigResourceTypeTopic, "foo"}, {kmsg.ConfigResourceTypeBroker, "x"}} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, res)
	}
	out = append(out, in(dc, false))
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "foo", math.MaxInt32
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{cpt}
	out = append(out, in(cp, false), in(cp, true))
	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.Version = 1
	out = append(out, in(dcl, false))
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version, el.ElectionType = 2, 1
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "foo", Partitions: []int32{0, 0, -1}}}
	out = append(out, in(el, false), in(el, true))
	return out
}
