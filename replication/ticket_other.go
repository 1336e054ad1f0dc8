//go:build !js

package replication

// Outside a page, ClientConfig.KeepTicket keeps nothing (a native game
// keeps Client.ResumeTicket where it sees fit).

func loadTicket(string) []byte   { return nil }
func storeTicket(string, []byte) {}
func forgetTicket(string)        {}
