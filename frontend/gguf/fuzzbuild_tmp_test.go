package gguf

func fuzzBuild(*File) {}
func ggufTensorName(s string) string { return s }
