package group

import "testing"

// TestPartitionForMatchesJava checks PartitionFor against values computed
// outside this code: Java's String.hashCode and Kafka's partitionFor over 50
// partitions, worked out with python3 over UTF-16-BE code units (see the
// commit that added this test). "polygenelubricants" hashes to
// Integer.MIN_VALUE, which Utils.abs maps to 0; "g😀" has a surrogate pair.
func TestPartitionForMatchesJava(t *testing.T) {
	for _, tc := range []struct {
		id        string
		hash      int32
		partition int32
	}{
		{"", 0, 0},
		{"a", 97, 47},
		{"my-group", -1906497762, 12},
		{"test-group", 627841412, 12},
		{"console-consumer-12345", 158455506, 6},
		{"polygenelubricants", -2147483648, 0},
		{"grüppe", -1233264812, 12},
		{"组", 32452, 2},
		{"g\U0001F600", 1871882, 32},
		{"franz-go-group", -1570052090, 40},
	} {
		if got := javaStringHashCode(tc.id); got != tc.hash {
			t.Errorf("javaStringHashCode(%q) = %d, want %d", tc.id, got, tc.hash)
		}
		if got := PartitionFor(tc.id, 50); got != tc.partition {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", tc.id, got, tc.partition)
		}
	}
}
