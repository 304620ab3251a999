//go:build tools

package deps

import (
	_ "github.com/go-zookeeper/zk"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/pflag"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kbin"
	_ "github.com/twmb/franz-go/pkg/kerr"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "pgregory.net/rapid"
)
