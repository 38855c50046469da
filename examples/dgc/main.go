// Command dgc is a lease-based distributed garbage collector (dgc.rspec,
// handlers.go), explored and run across processes by the same handlers.
package main

func main() {}
