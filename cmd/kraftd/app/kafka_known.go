package app

import (
	"fmt"
	"slices"
	"strings"
)

// A Kafka server.properties holds many settings kraftd has no use for: thread
// counts, socket buffers, log retention of data topics, internal-topic replication
// factors. Kafka's own stock files set them, so refusing them would refuse the
// files the README says work as they are. kraftd therefore tells three kinds of
// names apart:
//
//   - its own keys (the Keys table): applied;
//   - names Kafka defines (kafkaKeys and the prefixed forms below) that kraftd
//     does not use: accepted, remembered, and listed in one warning when the node
//     starts (App.New), except the few whose value would promise a protection
//     kraftd does not give (kafkaKeyChecks), which are refused;
//   - anything else: a typo, refused with ErrUnknownKey naming the key.

// kafkaKeySet is kafkaKeys as a set.
var kafkaKeySet = func() map[string]bool {
	m := make(map[string]bool, len(kafkaKeys))
	for _, k := range kafkaKeys {
		m[k] = true
	}
	return m
}()

// kafkaPrefixes are name prefixes under which Kafka reads settings whose rest is
// free: config providers (AbstractConfig, KIP-297), the metrics reporter context
// (KIP-606) and the default prefixes of the tiered-storage plugins' settings
// (remote.log.storage.manager.impl.prefix, remote.log.metadata.manager.impl.prefix).
var kafkaPrefixes = []string{"config.providers.", "metrics.context.", "rsm.config.", "rlmm.config."}

// kafkaKnownKey reports whether Kafka's broker or controller would recognise name:
// one of kafkaKeys, "config.providers", a name under kafkaPrefixes, or a
// per-listener override listener.name.<listener>.<key> whose <key> is one of those
// or a SASL-mechanism-prefixed <mechanism>.<sasl key>
// (listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config).
func kafkaKnownKey(name string) bool {
	if kafkaKeySet[name] || name == "config.providers" {
		return true
	}
	for _, p := range kafkaPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return false
	}
	listener, key, ok := strings.Cut(rest, ".")
	if !ok || listener == "" {
		return false
	}
	if kafkaKeySet[key] {
		return true
	}
	// Only SASL settings take a mechanism prefix (the JAAS config and callback
	// handlers of one mechanism on one listener).
	mechanism, key, ok := strings.Cut(key, ".")
	return ok && mechanism != "" && strings.HasPrefix(key, "sasl.") && kafkaKeySet[key]
}

// kafkaKeyChecks refuse values of Kafka settings kraftd does not implement when
// ignoring them would leave the node less protected than the operator asked for.
// Each error names the key and says what kraftd does instead.
var kafkaKeyChecks = map[string]func(value string) error{
	"authorizer.class.name": func(v string) error {
		if v == "" {
			return nil
		}
		return badValue("authorizer.class.name", v, "names an authorizer, but kraftd has none: every client "+
			"may do everything it can reach. Remove the setting and keep the listeners on an isolated network")
	},
	"security.inter.broker.protocol": func(v string) error {
		if strings.EqualFold(v, "PLAINTEXT") {
			return nil
		}
		return badValue("security.inter.broker.protocol", v, "is not PLAINTEXT; kraftd supports only PLAINTEXT")
	},
}

// noteKafkaKey accepts a Kafka setting kraftd does not use, or refuses its value
// (kafkaKeyChecks). Accepted names are listed by IgnoredKafkaKeys.
func (c *Config) noteKafkaKey(key, value string) error {
	if check := kafkaKeyChecks[key]; check != nil {
		if err := check(value); err != nil {
			return err
		}
	}
	if !slices.Contains(c.ignored, key) {
		c.ignored = append(c.ignored, key)
	}
	return nil
}

// IgnoredKafkaKeys lists, sorted, the Kafka settings that were set but that
// kraftd does not use (num.network.threads, log.retention.hours, ...). App.New
// logs them in one warning.
func (c *Config) IgnoredKafkaKeys() []string {
	return slices.Sorted(slices.Values(c.ignored))
}

// unknownKey is the error for a name neither kraftd nor Kafka defines, with the
// closest kraftd or Kafka key when one is a likely typo of it.
func unknownKey(name string) error {
	if near := nearestKey(name); near != "" {
		return fmt.Errorf("%w %q (did you mean %q?)", ErrUnknownKey, name, near)
	}
	return fmt.Errorf("%w %q", ErrUnknownKey, name)
}

// nearestKey is the kraftd or Kafka key within two single-character edits of
// name ("" if none); kraftd's own keys win ties.
func nearestKey(name string) string {
	best, bestDist := "", 3
	consider := func(k string) {
		if d := editDistance(name, k, bestDist); d < bestDist {
			best, bestDist = k, d
		}
	}
	for _, k := range keys {
		consider(k.Name)
	}
	for _, k := range kafkaKeys {
		consider(k)
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit when it is at
// least limit (the rows stop early once every cell is past it).
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}
