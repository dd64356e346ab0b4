module github.com/shredd/shredd

go 1.26.8

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/mattn/go-sqlite3 v1.14.53
	golang.org/x/crypto v0.59.0
)
