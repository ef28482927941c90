package main

import "strings"

// CommandPaths lists every command and subcommand of the command table
// ("serve", "run", "run submit", ...), for the end-to-end tests in package
// main_test, which run the binary.
func CommandPaths() []string {
	var paths []string
	var walk func(prefix string, group []command)
	walk = func(prefix string, group []command) {
		for _, c := range group {
			path := strings.TrimSpace(prefix + " " + c.name)
			paths = append(paths, path)
			walk(path, c.subs)
		}
	}
	walk("", commands)
	return paths
}

// CommandGroups lists the commands that have subcommands.
func CommandGroups() []string {
	var groups []string
	for _, c := range commands {
		if c.subs != nil {
			groups = append(groups, c.name)
		}
	}
	return groups
}
