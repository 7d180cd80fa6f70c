package webhook

import (
	"fmt"
	neturl "net/url"
	"strings"
)

// TopicPlaceholder in PublisherConfig.URL is replaced by each message's topic.
const TopicPlaceholder = "{topic}"

// urlTemplate is a URL with TopicPlaceholder in its path or query, split so that each occurrence is escaped
// for its position: a topic stays one path segment or one query value, whatever it contains.
type urlTemplate struct {
	path, query []string // the parts between placeholders; query is nil without a query
	fragment    string   // "#…" or ""
}

// parseURLTemplate checks raw and splits it around its placeholders. The placeholder is allowed in the path
// and in the query only: in the scheme, host or fragment a topic would choose the server or vanish.
func parseURLTemplate(raw string) (*urlTemplate, error) {
	u, err := neturl.Parse(strings.ReplaceAll(raw, TopicPlaceholder, "t"))
	if err != nil {
		return nil, fmt.Errorf("URL %s: %w", redactURL(raw), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %s: the scheme must be http or https", redactURL(raw))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("URL %s has no host; write %s://host/path", redactURL(raw), u.Scheme)
	}
	rest, fragment, _ := strings.Cut(raw, "#")
	if strings.Contains(fragment, TopicPlaceholder) {
		return nil, fmt.Errorf("URL %s: %s in the fragment is never sent; put it in the path or the query", redactURL(raw), TopicPlaceholder)
	}
	pathPart, query, hasQuery := strings.Cut(rest, "?")
	scheme, afterScheme, _ := strings.Cut(pathPart, "://")
	authority, path, _ := strings.Cut(afterScheme, "/")
	if strings.Contains(authority, TopicPlaceholder) {
		return nil, fmt.Errorf("URL %s: %s in the host or user name would let a topic choose the server; put it in the path or the query",
			redactURL(raw), TopicPlaceholder)
	}
	t := &urlTemplate{path: strings.Split(scheme+"://"+authority+"/"+path, TopicPlaceholder)}
	if !strings.Contains(afterScheme, "/") {
		t.path = []string{scheme + "://" + authority}
	}
	if hasQuery {
		t.query = strings.Split(query, TopicPlaceholder)
	}
	if fragment != "" || strings.HasSuffix(rest, "#") {
		t.fragment = "#" + fragment
	}
	return t, nil
}

// hasTopic reports whether the template needs a topic.
func (t *urlTemplate) hasTopic() bool { return len(t.path) > 1 || len(t.query) > 1 }

// expand returns the URL for topic. The topics "", "." and ".." are refused: in a path they would name the
// parent or the same folder, an endpoint other than the one configured.
func (t *urlTemplate) expand(topic string) (string, error) {
	if t.hasTopic() && (topic == "" || topic == "." || topic == "..") {
		return "", fmt.Errorf("topic %q cannot take the place of %s in a URL", topic, TopicPlaceholder)
	}
	var b strings.Builder
	b.WriteString(strings.Join(t.path, neturl.PathEscape(topic)))
	if t.query != nil {
		b.WriteByte('?')
		b.WriteString(strings.Join(t.query, neturl.QueryEscape(topic)))
	}
	b.WriteString(t.fragment)
	return b.String(), nil
}
