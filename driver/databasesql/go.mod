module github.com/postbox-go/postbox/driver/databasesql

go 1.26.0

require github.com/postbox-go/postbox v0.1.0
