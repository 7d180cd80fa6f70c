package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// selfSigned makes a certificate for 127.0.0.1 that is its own CA, and returns it as a server configuration and
// as a PEM file for clients to trust.
func selfSigned(t *testing.T) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "postbox test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, path
}

// natsServer runs a JetStream server on 127.0.0.1, with TLS required when cfg is set, and returns its port.
func natsServer(t *testing.T, cfg *tls.Config) int {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true, TLSConfig: cfg, TLS: cfg != nil})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	return s.Addr().(*net.TCPAddr).Port
}

// TestNATSRequiresTLS: tls:// (or ?tls=true) with ca_file publishes over verified TLS to a server with a
// self-signed certificate, and ?tls=true never falls back to plain text with a server that offers no TLS.
func TestNATSRequiresTLS(t *testing.T) {
	cfg, ca := selfSigned(t)
	port := natsServer(t, cfg)
	for _, broker := range []string{
		"tls://127.0.0.1:%d?ca_file=%s&stream=ORDERS&subjects=orders",
		"nats://127.0.0.1:%d?tls=true&ca_file=%s&stream=ORDERS&subjects=orders",
	} {
		broker = strings.Replace(strings.Replace(broker, "%d", strconv.Itoa(port), 1), "%s", ca, 1)
		rl := relayed(t, nil, "orders", 2, "--broker", broker)
		eventually(t, "two messages published over TLS", func() bool { return pending(t, rl.tg) == 0 })
		if r := rl.stop(); r.code != 0 {
			t.Fatalf("%s: relay exit %d: %s", broker, r.code, r.stderr)
		}
	}

	// A server without TLS is refused at start, and the message is kept back from it.
	plain := "nats://127.0.0.1:" + strconv.Itoa(natsServer(t, nil)) + "?tls=true"
	refusedAtStart(t, "no password", plain, "--broker", plain, "--start-timeout", "3s")

	for _, bad := range []string{"tls://127.0.0.1:4222?tls=false", "nats://127.0.0.1:4222?tls=maybe", "nats://127.0.0.1:4222?ca_file=/no/such.pem"} {
		if r := run(t, nil, "relay", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db"), "--broker", bad); r.code != ExitUsage {
			t.Errorf("--broker %s: exit %d, %s; want a usage error", bad, r.code, r.stderr)
		}
	}
}
