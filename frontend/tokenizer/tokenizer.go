// Package tokenizer says what a language model's tokenizer provides. The
// algorithms live in subpackages, each constructed from plain data by the
// format loaders that read it from their files:
//
//   - sentencepiece: SentencePiece's score-ordered BPE as llama2.c's run.c
//     runs it (llama2.c tok*.bin, GGUF "llama" vocabularies, build folders);
//   - bpe: rank-ordered BPE with Hugging Face's pipeline around it:
//     byte-level BPE (GPT-2, Qwen2, Llama 3; tokenizer.json and GGUF
//     "gpt2" vocabularies) and SentencePiece-style BPE with byte fallback
//     (LLaMA and Mistral tokenizer.json).
package tokenizer

// Model is what every tokenizer tapml loads provides.
type Model interface {
	// Encode returns the ids of text, with the BOS and EOS ids around them
	// when asked and the tokenizer has them.
	Encode(text string, bos, eos bool) []int
	// Decode returns the text of ids, special tokens left out.
	Decode(ids []int) string
	// Piece returns the text that token tok prints when generated after prev.
	Piece(prev, tok int) string
	BOS() int // the id Encode puts first when asked, -1: none
	EOS() int // the id Encode puts last when asked, -1: none
	// IsEOG reports whether sampling id ends generation (an end-of-
	// generation token: the model's EOS ids, or llama2.c's BOS).
	IsEOG(id int) bool
	VocabSize() int
}
