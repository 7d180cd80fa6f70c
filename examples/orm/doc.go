// Package orm holds one small program for each ORM or query library Go teams use with PostgreSQL (gorm, sqlx,
// bun, ent, sqlc), and one for database/sql on MySQL or MariaDB (mysql), each enqueueing an event in the ORM's own transaction with the Postbox driver that matches it,
// and each tested: the event exists if and only if the ORM's transaction commits. It is a module of its own, so
// that no user and no other example downloads these libraries.
package orm
