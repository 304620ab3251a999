package app

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchSendfileMetrics: a consumer reads what a producer wrote to a combined
// node; /metrics counts the record bytes the broker sent from the segment files
// by sendfile, and none copied (a plain TCP connection on Linux).
func TestFetchSendfileMetrics(t *testing.T) {
	a := startMeteredNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const l = `{node="1"}`
	if m := scrape(t, a); m["kraftd_fetch_records_sendfile_bytes_total"+l] != 0 {
		t.Fatalf("sendfile bytes before any fetch: %v", m["kraftd_fetch_records_sendfile_bytes_total"+l])
	}
	seed := a.Addr("PLAINTEXT").String()
	prod, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("metered"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // the bytes on disk are the bytes sent
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	value := make([]byte, 1000)
	const n = 50
	for range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics("metered"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	m := scrape(t, a)
	if sent := m["kraftd_fetch_records_sendfile_bytes_total"+l]; sent < n*1000 {
		t.Errorf("sendfile bytes %v after consuming %d records of 1000 bytes", sent, n)
	}
	if copied := m["kraftd_fetch_records_copied_bytes_total"+l]; copied != 0 {
		t.Errorf("copied bytes %v on a plain TCP connection", copied)
	}
}
