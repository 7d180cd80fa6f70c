package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/jsonschema"
)

// fileConfig is a parsed config file: option values by name, and the event registry.
//
//	db: postgres://postbox@db.internal/app
//	broker: nats://nats.internal:4222
//	route:
//	  - payments.*=kafka://kafka-1:9092,kafka-2:9092
//	http: :9090
//	batch-size: 1000
//	events:
//	  - type: order.created
//	    topic: orders
//	    key_required: true
//	    schema: {type: object, required: [id], properties: {id: {type: string}}}
//	  - type: order.cancelled
//	    topic: orders
//	    schema_file: schemas/order-cancelled.json
type fileConfig struct {
	path    string
	mode    os.FileMode // its permissions, for secretsReadable
	values  map[string]any
	events  []eventConfig
	sources []sourceConfig // nil when the file has no sources key
}

// eventConfig is one entry of the file's events list.
type eventConfig struct {
	Type        string `yaml:"type"`
	Topic       string `yaml:"topic"`
	KeyRequired bool   `yaml:"key_required"`
	Schema      any    `yaml:"schema"`
	SchemaFile  string `yaml:"schema_file"`
	Description string `yaml:"description"`
}

const eventsKey = "events"

// quoteHint explains the YAML trap a config file most often falls into: a colon followed by a space or the end
// of the line starts a mapping.
const quoteHint = `a value holding ": " or ending with ":" must be quoted, such as broker: "stdout:" or route: "audit.*=stdout:"`

func loadConfigFile(path string) (*fileConfig, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if err := checkConfigWritable(path, info.Mode()); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(b, &raw); err != nil {
		hint := ""
		if strings.Contains(err.Error(), "mapping values are not allowed") || strings.Contains(err.Error(), "did not find expected key") {
			hint = "; " + quoteHint
		}
		return nil, usageErrorf("config file %s is not valid YAML: %v%s", path, err, hint)
	}
	known := knownKeys()
	fc := &fileConfig{path: path, mode: info.Mode().Perm(), values: map[string]any{}}
	for key, node := range raw {
		if key == eventsKey {
			if err := node.Decode(&fc.events); err != nil {
				return nil, usageErrorf("config file %s, events: %v", path, err)
			}
			continue
		}
		if key == sourcesKey {
			if fc.sources, err = decodeSources(path, node); err != nil {
				return nil, err
			}
			continue
		}
		if !slices.Contains(known, key) {
			return nil, usageErrorf("config file %s: unknown key %q; keys are flag names without dashes in front (%s), %s and %s",
				path, key, strings.Join(known, ", "), eventsKey, sourcesKey)
		}
		var v any
		if err := node.Decode(&v); err != nil {
			return nil, usageErrorf("config file %s, key %s: %v", path, key, err)
		}
		if node.Kind == yaml.MappingNode {
			return nil, usageErrorf("config file %s, key %s (line %d): want a value or a list of values, not a mapping; %s",
				path, key, node.Line, quoteHint)
		}
		fc.values[key] = v
	}
	return fc, nil
}

// checkConfigWritable refuses a config file that every user of the machine may change: whoever writes it
// chooses the database, the brokers and the secrets the daemon uses. (Windows has no such mode bits.)
func checkConfigWritable(path string, mode os.FileMode) error {
	if goruntime.GOOS == "windows" || mode.Perm()&0o002 == 0 {
		return nil
	}
	return usageErrorf("config file %s is writable by every user (mode %04o): anyone on this machine could change where "+
		"messages go and which secrets sign them; run chmod o-w %s (chmod 600 when it holds a secret)", path, mode.Perm(), path)
}

// secretsReadable returns the keys of the file that hold a secret (a URL with a password, a signing key), when
// every user of the machine may read the file; nil otherwise. The daemon warns: it still runs, because a
// read-only mount (a Kubernetes ConfigMap) often shows mode 0644.
func (fc *fileConfig) secretsReadable(opts []*option) []string {
	if fc == nil || goruntime.GOOS == "windows" || fc.mode&0o004 == 0 {
		return nil
	}
	var keys []string
	for _, o := range opts {
		if !strings.HasPrefix(o.from, "config file ") {
			continue
		}
		v := o.value.String()
		if o.secretValue && v != "" || o.secret && len(urlSecrets(v)) > 0 {
			keys = append(keys, o.name)
		}
	}
	return keys
}

// registry builds the event registry from the file's events list; nil when the file has none.
func (fc *fileConfig) registry() (*postbox.Registry, error) {
	if fc == nil || len(fc.events) == 0 {
		return nil, nil
	}
	reg := &postbox.Registry{}
	for i, e := range fc.events {
		et := postbox.EventType{Type: e.Type, Topic: e.Topic, KeyRequired: e.KeyRequired, Description: e.Description}
		where := fmt.Sprintf("config file %s, events[%d] (%s)", fc.path, i, e.Type)
		doc, err := e.schemaDoc(filepath.Dir(fc.path))
		if err != nil {
			return nil, usageErrorf("%s: %v", where, err)
		}
		if doc != nil {
			schema, err := jsonschema.Compile(doc)
			if err != nil {
				return nil, usageErrorf("%s: %v", where, err)
			}
			et.Payload = schema
		}
		if err := reg.Register(et); err != nil {
			return nil, usageErrorf("%s: %v", where, err)
		}
	}
	return reg, nil
}

// schemaDoc returns the event's JSON Schema as JSON: the inline schema, or the file, relative to the config
// file's directory.
func (e eventConfig) schemaDoc(dir string) ([]byte, error) {
	switch {
	case e.Schema != nil && e.SchemaFile != "":
		return nil, fmt.Errorf("set schema or schema_file, not both")
	case e.Schema != nil:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		if err := enc.Encode(e.Schema); err != nil {
			return nil, fmt.Errorf("schema: %v", err)
		}
		return b.Bytes(), nil
	case e.SchemaFile != "":
		path := e.SchemaFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		return os.ReadFile(path)
	}
	return nil, nil
}
