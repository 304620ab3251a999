package interop

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
)

// Produce and consume with the other clients of the interop suite: each
// writes n records to its own topic (auto-created) and reads them back in
// order from the start.

const clientRecords = 20

func clientValues(prefix string) []string {
	out := make([]string, clientRecords)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

func TestSaramaProduceConsume(t *testing.T) {
	t.Parallel()
	saramaProduceConsume(t, newCluster(t, Controllers(1), Brokers(1)))
}

// saramaProduceConsume is the test body against c, a KRaft or zk-legacy cluster.
func saramaProduceConsume(t *testing.T, c *cluster) {
	c.waitBrokersListed(t)
	for _, v := range []sarama.KafkaVersion{sarama.DefaultVersion, sarama.V4_0_0_0} {
		topic := "sarama-" + strings.ReplaceAll(v.String(), ".", "-")
		conf := saramaConfig(v)
		conf.Metadata.AllowAutoTopicCreation = true
		conf.Producer.Return.Successes = true
		conf.Producer.RequiredAcks = sarama.WaitForAll
		conf.Producer.Idempotent = v.IsAtLeast(sarama.V0_11_0_0)
		conf.Net.MaxOpenRequests = 1
		// An auto-created topic has no leader for a moment (LEADER_NOT_AVAILABLE,
		// as in Kafka; longer in zk-legacy, through ZooKeeper, on a loaded machine):
		// 3 retries 100 ms apart, sarama's default, can run out.
		conf.Producer.Retry.Max, conf.Metadata.Retry.Max = 30, 30
		prod, err := sarama.NewSyncProducer(c.bootstrap(), conf)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		want := clientValues(topic)
		for _, val := range want {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(val)}); err != nil {
				t.Fatalf("%s: produce: %v", v, err)
			}
		}
		_ = prod.Close()
		cons, err := sarama.NewConsumer(c.bootstrap(), conf)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("%s: consume: %v", v, err)
		}
		for i, val := range want {
			select {
			case m := <-pc.Messages():
				if string(m.Value) != val || m.Offset != int64(i) {
					t.Fatalf("%s: record %d is %q at %d", v, i, m.Value, m.Offset)
				}
			case err := <-pc.Errors():
				t.Fatalf("%s: %v", v, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: record %d not consumed", v, i)
			}
		}
		_ = pc.Close()
		_ = cons.Close()
	}
}

func TestKafkaGoProduceConsume(t *testing.T) {
	t.Parallel()
	kafkaGoProduceConsume(t, newCluster(t, Controllers(1), Brokers(1)))
}

// kafkaGoProduceConsume is the test body against c, a KRaft or zk-legacy cluster.
func kafkaGoProduceConsume(t *testing.T, c *cluster) {
	c.waitBrokersListed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "kafka-go"
	// kafka-go's Writer fails a write to a topic it just auto-created
	// (its docs say to retry); create it first instead.
	if _, err := newFranzAdmin(t, c).(*franzAdmin).adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broker to publish the topic", 10*time.Second, func() bool {
		v, err := partitionView(t, c.bootstrap()[0], topic)
		return err == nil && len(v) == 1
	})
	w := &kafka.Writer{Addr: kafka.TCP(c.bootstrap()...), Topic: topic, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond}
	want := clientValues(topic)
	var msgs []kafka.Message
	for _, v := range want {
		msgs = append(msgs, kafka.Message{Value: []byte(v)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
	_ = w.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.bootstrap(), Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	for i, v := range want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("consume %d: %v", i, err)
		}
		if string(m.Value) != v || m.Offset != int64(i) {
			t.Fatalf("record %d is %q at %d", i, m.Value, m.Offset)
		}
	}
}

// kafka-python 2.0.2 (Debian's python3-kafka) produces with acks=all and
// consumes with Fetch v4 and old ListOffsets versions.
func TestKafkaPythonProduceConsume(t *testing.T) {
	t.Parallel()
	if !pythonUsable() {
		t.Skipf("kafka-python not importable by %s (make deps installs python3-kafka)", systemPython)
	}
	kafkaPythonProduceConsume(t, newCluster(t, Controllers(1), Brokers(1)))
}

// kafkaPythonProduceConsume is the test body against c, a KRaft or zk-legacy cluster.
func kafkaPythonProduceConsume(t *testing.T, c *cluster) {
	c.waitBrokersListed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script := `
import sys
from kafka import KafkaProducer, KafkaConsumer
servers, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
p = KafkaProducer(bootstrap_servers=servers, acks="all")
for i in range(n):
    p.send(topic, ("%s-%02d" % (topic, i)).encode()).get(timeout=20)
p.close()
c = KafkaConsumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest", consumer_timeout_ms=10000, enable_auto_commit=False, group_id=None)
for m in c:
    print(m.offset, m.value.decode())
    n -= 1
    if n == 0:
        break
c.close()
`
	out, err := exec.CommandContext(ctx, systemPython, "-c", script, strings.Join(c.bootstrap(), ","), "python", fmt.Sprint(clientRecords)).CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-python: %v\n%s", err, out)
	}
	var want strings.Builder
	for i, v := range clientValues("python") {
		fmt.Fprintf(&want, "%d %s\n", i, v)
	}
	if string(out) != want.String() {
		t.Fatalf("kafka-python printed\n%s\nwant\n%s", out, want.String())
	}
}
