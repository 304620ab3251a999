package controller

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// usableBroker is a broker replicas may be placed on: registered and not
// shutting down. Fenced brokers may hold followers but never the first
// (leader) replica.
type usableBroker struct {
	id     int32
	rack   *string
	fenced bool
}

// errPlacement carries the reason placement failed; createTopics prefixes
// it with "Unable to replicate the partition N time(s): " as Kafka does.
type errPlacement string

func (e errPlacement) Error() string { return string(e) }

// brokerRing is one rack's brokers of one kind (fenced or not), walked from
// a rotating offset so consecutive partitions start on different brokers.
type brokerRing struct {
	ids    []int32
	index  int
	offset int
	epoch  int
}

func (r *brokerRing) init(rng *rand.Rand) {
	if len(r.ids) > 0 {
		slices.Sort(r.ids)
		r.offset = rng.IntN(len(r.ids))
	}
}

// next returns the ring's next broker in placement epoch, or -1 when every
// broker was used in this epoch. A new epoch shifts the start by one.
func (r *brokerRing) next(epoch int) int32 {
	if len(r.ids) == 0 {
		return -1
	}
	if r.epoch != epoch {
		r.epoch, r.index = epoch, 0
		r.offset = (r.offset + 1) % len(r.ids)
	}
	if r.index >= len(r.ids) {
		return -1
	}
	id := r.ids[(r.index+r.offset)%len(r.ids)]
	r.index++
	return id
}

type rack struct{ unfenced, fenced brokerRing }

func (k *rack) next(epoch int) int32 {
	if id := k.unfenced.next(epoch); id >= 0 {
		return id
	}
	return k.fenced.next(epoch)
}

// stripedPlacer spreads replicas over racks and brokers the way Kafka's
// StripedReplicaPlacer does: each partition's leader comes from the next
// rack in turn (unfenced brokers only), followers from the following racks,
// and after as many partitions as there are unfenced brokers the rack and
// broker orders are reshuffled so the same replica sets do not repeat.
// With one rack per broker (or no racks) this is round-robin with a
// random start; with racks every partition spans as many racks as it can.
type stripedPlacer struct {
	rng         *rand.Rand
	racks       map[string]*rack
	names       []string // sorted; "" (no rack) first, as Kafka's Optional.empty
	numTotal    int
	numUnfenced int
	epoch       int
	offset      int
}

func newStripedPlacer(rng *rand.Rand, brokers []usableBroker) *stripedPlacer {
	p := &stripedPlacer{rng: rng, racks: map[string]*rack{}}
	for _, b := range brokers {
		name := ""
		if b.rack != nil {
			name = "\x00" + *b.rack // distinct from "no rack", sorts after it
		}
		k, ok := p.racks[name]
		if !ok {
			k = &rack{}
			p.racks[name] = k
			p.names = append(p.names, name)
		}
		if b.fenced {
			k.fenced.ids = append(k.fenced.ids, b.id)
		} else {
			k.unfenced.ids = append(k.unfenced.ids, b.id)
			p.numUnfenced++
		}
		p.numTotal++
	}
	for _, name := range p.names {
		p.racks[name].unfenced.init(rng)
		p.racks[name].fenced.init(rng)
	}
	slices.SortFunc(p.names, cmp.Compare)
	if len(p.names) > 0 {
		p.offset = rng.IntN(len(p.names))
	}
	return p
}

// check returns Kafka's reason why rf replicas cannot be placed.
func (p *stripedPlacer) check(rf int) error {
	switch {
	case rf <= 0:
		return errPlacement(fmt.Sprintf("Invalid replication factor %d: the replication factor must be positive.", rf))
	case p.numUnfenced == 0:
		return errPlacement("All brokers are currently fenced.")
	case rf > p.numTotal:
		return errPlacement(fmt.Sprintf("The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, p.numTotal))
	}
	return nil
}

// place returns count replica lists of rf brokers each; check(rf) must
// have passed.
func (p *stripedPlacer) place(count, rf int) [][]int32 {
	out := make([][]int32, count)
	for i := range out {
		out[i] = p.placeOne(rf)
	}
	return out
}

func (p *stripedPlacer) placeOne(rf int) []int32 {
	if p.epoch == p.numUnfenced && p.numUnfenced > 1 {
		p.shuffle()
		p.epoch = 0
	}
	if p.offset == len(p.names) {
		p.offset = 0
	}
	replicas := make([]int32, 0, rf)
	first := p.offset
	for {
		if id := p.racks[p.names[first]].unfenced.next(p.epoch); id >= 0 {
			replicas = append(replicas, id)
			break
		}
		first = (first + 1) % len(p.names)
	}
	idx := p.offset
	for len(replicas) < rf {
		id := int32(-1)
		if idx == first {
			first = -1 // the leader's rack already gave its broker this round
		} else {
			id = p.racks[p.names[idx]].next(p.epoch)
		}
		idx = (idx + 1) % len(p.names)
		if id >= 0 {
			replicas = append(replicas, id)
		}
	}
	p.epoch++
	p.offset++
	return replicas
}

func (p *stripedPlacer) shuffle() {
	p.rng.Shuffle(len(p.names), func(i, j int) { p.names[i], p.names[j] = p.names[j], p.names[i] })
	for _, name := range p.names {
		k := p.racks[name]
		for _, ids := range [][]int32{k.fenced.ids, k.unfenced.ids} {
			p.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		}
	}
}
