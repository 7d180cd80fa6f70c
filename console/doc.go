// Package console is Postbox's operator console: an http.Handler over one or more databases' outbox and inbox
// tables, which the postbox console command serves and which a program can mount in its own server.
//
// Its pages show the backlog of each database and topic with a live chart, list dead letters by topic, type,
// key, error text and time (to read, retry, purge, or edit and send again), find a message by ID or key, replay
// kept published messages, pause and resume topics, show each consumer's inbox, and list the migrations and
// partitions. With a credential configured (Config.Token, Config.Tokens, or Config.User and Config.Password),
// reading needs a login too (unless Config.PublicReads); every change needs a login and the CSRF token of the
// form, and is logged with who made it. Config.ReadOnly turns changes off. Set Config.Hosts to the names the
// console is served under, and Config.TrustedProxies to the proxies in front of it.
//
//	con, err := console.New(&console.Config{
//		Databases: []console.Database{{Name: "orders", Source: console.FromClient(client)}},
//		Token:     os.Getenv("POSTBOX_CONSOLE_TOKEN"),
//	})
//	go con.Run(ctx) // samples the overview's figures until ctx is done
//	mux.Handle("/postbox/", http.StripPrefix("/postbox", con))
//
// The pages are html/template with one small script, all embedded: the console loads nothing from elsewhere and
// works offline. No page counts a whole table: counts stop at Config.CountLimit.
package console
