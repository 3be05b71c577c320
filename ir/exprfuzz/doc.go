// Package exprfuzz holds only FuzzParseExpr, the fuzz test of ir.ParseExpr,
// kept out of package ir so that "go test ./ir -fuzz=FuzzParse" matches one
// fuzz test. Run it with: go test ./ir/exprfuzz -fuzz=FuzzParseExpr
package exprfuzz
