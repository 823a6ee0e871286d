module github.com/ingot-dev/ingot

go 1.26.8

require golang.org/x/sys v0.35.0
