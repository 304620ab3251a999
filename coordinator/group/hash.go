package group

// javaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the string's UTF-16 code units, in int32 arithmetic. Kafka hashes
// group ids (and transactional ids) with it, so every client and tool
// computes the same coordinator partition as the broker.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			// A supplementary character is two UTF-16 code units: the
			// high and the low surrogate.
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// kafkaAbs is Kafka's Utils.abs: the absolute value, except that
// math.MinInt32 (which has none in int32) maps to 0.
func kafkaAbs(n int32) int32 {
	switch {
	case n == -1<<31:
		return 0
	case n < 0:
		return -n
	}
	return n
}

// PartitionFor is the __consumer_offsets partition whose leader coordinates
// group id: Utils.abs(id.hashCode()) % numPartitions, as Kafka's
// GroupCoordinator.partitionFor. numPartitions must be positive.
func PartitionFor(id string, numPartitions int32) int32 {
	return kafkaAbs(javaStringHashCode(id)) % numPartitions
}
