package cli

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// mysqlDefaultPort is the port of a mysql:// URL that names none.
const mysqlDefaultPort = "3306"

// mysqlDB opens a database/sql pool on a MySQL or MariaDB server from a URL:
//
//	mysql://user:pass@host:3306/db?param=value
//	mysql://user:pass@/db?socket=/run/mysqld/mysqld.sock
//
// Query parameters are go-sql-driver/mysql's (tls, timeout, readTimeout, charset, ...) or, for any other name, a
// session variable to set. interpolateParams is on unless the URL turns it off, which saves the driver two
// round trips per statement. It does no I/O.
func mysqlDB(raw string) (*sql.DB, error) {
	cfg, err := mysqlConfig(raw)
	if err != nil {
		return nil, err
	}
	db, err := mysqlOpen(cfg)
	if err != nil {
		return nil, usageErrorf("--db %s: %v", RedactURL(raw), err)
	}
	return db, nil
}

// mysqlOpen opens a pool from cfg, checking the character sets of each connection when it interpolates
// parameters. It does no I/O.
func mysqlOpen(cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	if !cfg.InterpolateParams {
		return sql.OpenDB(conn), nil
	}
	return sql.OpenDB(charsetChecked{conn}), nil
}

// charsetChecked reads the character sets of every new connection, since the URL is not the only thing that
// sets them: a server's init_connect may too. A connection whose client or connection character set is outside
// mysqlSafeCharsets is closed and refused, because the driver interpolates parameters assuming a safe one.
type charsetChecked struct{ driver.Connector }

func (c charsetChecked) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkSessionCharsets(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func checkSessionCharsets(ctx context.Context, conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return errors.New("mysql: the driver's connection cannot run a query to check its character sets")
	}
	rows, err := q.QueryContext(ctx, "SELECT @@character_set_client, @@character_set_connection", nil)
	if err != nil {
		return fmt.Errorf("read the connection's character sets: %w", err)
	}
	defer rows.Close()
	vals := make([]driver.Value, 2)
	if err := rows.Next(vals); err != nil {
		return fmt.Errorf("read the connection's character sets: %w", err)
	}
	for i, name := range []string{"character_set_client", "character_set_connection"} {
		var cs string
		switch v := vals[i].(type) {
		case []byte:
			cs = string(v)
		case string:
			cs = v
		}
		if !slices.Contains(mysqlSafeCharsets, strings.ToLower(cs)) {
			return fmt.Errorf("the server set %s to %q for a new connection (init_connect, or a session variable): with interpolated "+
				"parameters a multibyte character set such as this one can undo the escaping of values (SQL injection); "+
				"make the server's init_connect choose utf8mb4, or add interpolateParams=false to --db", name, cs)
		}
	}
	return nil
}

// mysqlConfig converts a mysql:// URL to the driver's configuration. The user and password are set on the
// configuration directly rather than pasted into a DSN string, so that a password may hold any character.
func mysqlConfig(raw string) (*mysql.Config, error) {
	fail := func(format string, args ...any) (*mysql.Config, error) {
		return nil, usageErrorf("--db %s: "+format+"; write mysql://user:pass@host:3306/database", append([]any{RedactURL(raw)}, args...)...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		if _, rest, ok := strings.Cut(raw, "@"); ok && strings.Contains(rest, "tcp(") {
			return fail("this is a go-sql-driver DSN, not a URL")
		}
		return fail("not a URL (%v)", scrubURLError(err))
	}
	if u.Opaque != "" || (u.Host == "" && !strings.HasPrefix(raw[len(u.Scheme)+1:], "//")) {
		return fail("not a URL with a host")
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if dbName == "" || strings.Contains(dbName, "/") {
		return fail("name one database in the path")
	}
	q := u.Query()
	socket := q.Get("socket")
	q.Del("socket")
	for k, vs := range q {
		if len(vs) != 1 {
			return fail("parameter %q is given %d times", k, len(vs))
		}
	}
	if !q.Has("interpolateParams") {
		q.Set("interpolateParams", "true")
	}
	if err := checkMySQLCharsets(q); err != nil {
		return nil, usageErrorf("--db %s: %v", RedactURL(raw), err)
	}

	netw, addr := "tcp", u.Host
	switch {
	case socket != "" && u.Host != "":
		return fail("set a host or ?socket=PATH, not both")
	case socket != "":
		netw, addr = "unix", socket
	case u.Host == "":
		return fail("no host")
	case u.Port() == "":
		addr = net.JoinHostPort(u.Hostname(), mysqlDefaultPort)
	}
	// Parsing the parameters through the driver's own DSN parser keeps every parameter it knows, and its
	// validation of them, with the address in place so that tls=true verifies the right host name.
	cfg, err := mysql.ParseDSN(netw + "(" + addr + ")/?" + q.Encode())
	if err != nil {
		return fail("%v", err)
	}
	if err := checkMySQLSessionParams(cfg.Params); err != nil {
		return nil, usageErrorf("--db %s: %v", RedactURL(raw), err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = dbName
	return cfg, nil
}

// mysqlSafeCharsets are the character sets in which no multibyte character has a backslash (0x5c) or a quote as
// a later byte. With interpolateParams the driver escapes values itself, assuming such a character set; in gbk,
// big5, sjis, cp932 or gb18030 the byte before an escaping backslash can swallow it, and the quote it escaped
// ends the string: "dead purge --topic $'x\xbf\x27 OR 1=1 -- '" would delete every row.
var mysqlSafeCharsets = []string{"utf8mb4", "utf8mb3", "utf8", "latin1", "ascii", "binary"}

// checkMySQLCharsets refuses, when the driver interpolates parameters, a charset, a collation or a session
// variable choosing a character set outside mysqlSafeCharsets.
func checkMySQLCharsets(q url.Values) error {
	if on, err := strconv.ParseBool(q.Get("interpolateParams")); err != nil || !on {
		return nil // the driver refuses a malformed value itself; prepared statements send values apart from SQL
	}
	safe := func(name string) bool {
		name = strings.ToLower(strings.Trim(strings.TrimSpace(name), "'\""))
		if cs, _, ok := strings.Cut(name, "_"); ok && name != "binary" {
			name = cs // a collation: its character set comes first
		}
		return slices.Contains(mysqlSafeCharsets, name)
	}
	for k, vs := range q {
		lk := strings.ToLower(k)
		if lk != "charset" && lk != "collation" && !strings.HasPrefix(lk, "character_set_") && !strings.HasPrefix(lk, "collation_") {
			continue
		}
		for _, v := range strings.Split(vs[0], ",") {
			if !safe(v) {
				return fmt.Errorf("%s=%s: with interpolated parameters a multibyte character set such as this one can undo "+
					"the escaping of values (SQL injection); use charset=utf8mb4, or add interpolateParams=false", k, vs[0])
			}
		}
	}
	return nil
}

// checkMySQLSessionParams refuses a session variable (a parameter the driver does not know) whose name or value
// could end the assignment and start another: the driver sends them as "SET name=value,..." without escaping, so
// "?autocommit=1%2Ccharacter_set_client%3Dgbk" would choose gbk behind checkMySQLCharsets. A name is an
// identifier; a value is a plain word (letters, digits and _ . : + -) or one single-quoted string with no quote or
// backslash inside.
func checkMySQLSessionParams(params map[string]string) error {
	plain := func(s string, extra string) bool {
		for _, c := range []byte(s) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || strings.IndexByte(extra, c) >= 0) {
				return false
			}
		}
		return s != ""
	}
	for k, v := range params {
		if !plain(k, "@.") {
			return fmt.Errorf("parameter %q is not a session variable name; use letters, digits and '_'", k)
		}
		quoted := len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' && !strings.ContainsAny(v[1:len(v)-1], "'\"\\")
		if !quoted && !plain(v, ".:+-") {
			return fmt.Errorf("parameter %s: the driver sends its value to the server as it is (SET %s=value), and a value with "+
				"',', '=', ';', a quote or another character outside letters, digits and _ . : + - could set other variables; "+
				"write a plain value, or one quoted string such as %s='+00:00' without quotes or backslashes inside", k, k, k)
		}
	}
	return nil
}

// scrubURLError returns the reason of a url.Parse error without the URL it quotes, which may hold a password.
func scrubURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
