package console

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/postbox-go/postbox"
)

// Bounds of a request's body: a form that changes data may carry an edited payload; every other form is a few
// fields.
const (
	maxChangeBody = 4<<20 + 64<<10
	maxFormBody   = 64 << 10
)

// parseProxies reads Config.TrustedProxies.
func parseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: console: trusted proxy %q is neither an IP address nor a CIDR range such as 10.0.0.0/8",
				postbox.ErrInvalidConfig, s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (c *Console) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range c.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func peerAddr(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

// fromProxy reports whether the request's peer is a trusted proxy.
func (c *Console) fromProxy(r *http.Request) bool {
	a, ok := peerAddr(r)
	return ok && c.trusted(a)
}

// clientAddr is the address of the client the request comes from: its peer, or, when the peer is a trusted
// proxy, the nearest address in X-Forwarded-For that is not one (the proxies append, so the ones to the left of
// it are the client's own word).
func (c *Console) clientAddr(r *http.Request) string {
	peer, ok := peerAddr(r)
	if !ok {
		return r.RemoteAddr
	}
	if !c.trusted(peer) {
		return peer.String()
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !c.trusted(a) {
			return a.Unmap().String()
		}
	}
	return peer.String()
}

// secure reports whether the browser reached the console over HTTPS: directly, or through a trusted proxy
// saying so.
func (c *Console) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return c.fromProxy(r) && strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https")
}

// hostAllowed reports whether the request's Host names the console: one of Config.Hosts, localhost, or an IP
// address. A page served from another name that resolves to the console's address (DNS rebinding) sends its
// own name, never an address.
func (c *Console) hostAllowed(r *http.Request) bool {
	if len(c.cfg.Hosts) == 0 {
		return true
	}
	host := r.Host
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	for _, h := range c.cfg.Hosts {
		h = strings.ToLower(h)
		if h == strings.ToLower(host) || strings.TrimSuffix(strings.Trim(h, "[]"), ".") == name {
			return true
		}
	}
	return false
}

// admit checks what every request must pass before a handler sees it: its Host, its body (bounded, never
// multipart, ignored for GET), and, when credentials are configured, a login for reading. It parses the form:
// GET parameters come from the URL alone. It reports whether the request may go on.
func (c *Console) admit(w http.ResponseWriter, r *http.Request) bool {
	if !c.hostAllowed(r) {
		c.cfg.Logger.Warn("console: request for another host refused", "host", r.Host, "remote", c.clientAddr(r))
		http.Error(w, "421 misdirected request: this console does not answer for "+r.Host+
			"; add the name to Config.Hosts (postbox console --public-host)", http.StatusMisdirectedRequest)
		return false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && strings.HasPrefix(mt, "multipart/") {
			c.refuse(w, r, http.StatusUnsupportedMediaType, "The console reads forms as application/x-www-form-urlencoded only.")
			return false
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		r.Body = http.NoBody
	case http.MethodPost:
		limit := int64(maxChangeBody)
		if r.URL.Path == "/login" || r.URL.Path == "/logout" {
			limit = maxFormBody
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	default: // no route takes another method; its body is bounded all the same
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	}
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			c.refuse(w, r, http.StatusRequestEntityTooLarge, "The form is larger than the console takes.")
			return false
		}
		c.refuse(w, r, http.StatusBadRequest, "The form could not be read: "+err.Error())
		return false
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && c.loginToRead() && !strings.HasPrefix(r.URL.Path, "/assets/") && r.URL.Path != "/login" &&
		c.who(r) == "" {
		if r.URL.Path == "/live" || strings.HasPrefix(r.URL.Path, "/api/") {
			http.Error(w, "401 unauthorized: log in to the console first", http.StatusUnauthorized)
			return false
		}
		next := r.URL.Path
		if r.URL.RawQuery != "" {
			next += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, basePath(r)+"/login?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
		return false
	}
	return true
}

// loginToRead reports whether reading needs a login: whenever a credential is configured, unless
// Config.PublicReads.
func (c *Console) loginToRead() bool { return c.canLogIn() && !c.cfg.PublicReads }
