package kafkabroker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxTopicLen is the longest Kafka topic name.
const MaxTopicLen = 249

// TopicConfig describes a topic for EnsureTopic.
type TopicConfig struct {
	// Name is the Kafka topic name (with any TopicPrefix already applied). Required.
	Name string
	// Partitions bounds the consumer group's parallelism: each partition is handled by one subscriber at a time,
	// in order. Default: the broker's num.partitions.
	Partitions int32
	// ReplicationFactor is how many brokers keep a copy. Default: the broker's default.replication.factor.
	ReplicationFactor int16
	// Configs are topic configs such as "retention.ms" or "min.insync.replicas".
	Configs map[string]string
}

// EnsureTopic creates the topic unless it exists. An existing topic is left as it is, whatever its partitions
// and configs. Call it at deploy or start-up time; Postbox never creates topics on its own, and a publisher
// configured without automatic topic creation fails messages for topics that do not exist.
func EnsureTopic(ctx context.Context, cl *kgo.Client, cfg TopicConfig) error {
	if cl == nil {
		return errors.New("kafkabroker: EnsureTopic needs a client; make one with kgo.NewClient(kgo.SeedBrokers(...))")
	}
	if err := CheckTopic(cfg.Name); err != nil {
		return fmt.Errorf("kafkabroker: EnsureTopic: %w", err)
	}
	if cfg.Partitions < 0 || cfg.ReplicationFactor < 0 {
		return fmt.Errorf("kafkabroker: EnsureTopic %s: Partitions %d and ReplicationFactor %d must not be negative (0 means the broker's default)",
			cfg.Name, cfg.Partitions, cfg.ReplicationFactor)
	}
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = cfg.Name
	t.NumPartitions = -1
	if cfg.Partitions > 0 {
		t.NumPartitions = cfg.Partitions
	}
	t.ReplicationFactor = -1
	if cfg.ReplicationFactor > 0 {
		t.ReplicationFactor = cfg.ReplicationFactor
	}
	for k, v := range cfg.Configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(v)
		t.Configs = append(t.Configs, c)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafkabroker: create topic %s: %w", cfg.Name, err)
	}
	for _, rt := range resp.Topics {
		err := kerr.ErrorForCode(rt.ErrorCode)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			continue
		}
		msg := ""
		if rt.ErrorMessage != nil {
			msg = ": " + *rt.ErrorMessage
		}
		return fmt.Errorf("kafkabroker: create topic %s: %w%s", cfg.Name, err, msg)
	}
	return nil
}

// CheckTopic returns an error unless name is a valid Kafka topic name: 1 to 249 ASCII letters, digits, '.',
// '_' and '-', and neither "." nor "..".
func CheckTopic(name string) error {
	switch {
	case name == "":
		return errors.New("topic is empty")
	case len(name) > MaxTopicLen:
		return fmt.Errorf("topic %q is %d bytes; Kafka allows %d", name, len(name), MaxTopicLen)
	case name == "." || name == "..":
		return fmt.Errorf("topic %q is not allowed by Kafka", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic %q is not a Kafka topic name: byte %d (%q) is not a letter, digit, '.', '_' or '-'", name, i, c)
		}
	}
	return nil
}
