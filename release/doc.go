// Package release checks that the nested modules a user installs
// (otelretry and redispace) can be installed on their own, as a
// fresh module outside this repository gets them: from a module proxy,
// with the replace directives of their go.mod files ignored.
//
// Its test makes a file-system module proxy holding the working tree's
// modules at the versions the nested go.mod files require, and runs go get
// and go build in a new module against it. docs/release.md says in which
// order the tags are pushed.
package release
