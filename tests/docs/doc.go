// Package docs holds the checks on archenet's documentation: every Go block
// of README.md quotes compiled code, every exported identifier of the
// documented packages has a doc comment, and every code line in a doc
// comment is a line of compiled code. It has no code of its own outside its
// tests.
package docs
