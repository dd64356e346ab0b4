package main
import (_ "github.com/go-chi/chi/v5"; _ "github.com/mattn/go-sqlite3"; _ "golang.org/x/crypto/hkdf")
func main(){}
