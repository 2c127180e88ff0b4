// Reads a JSON array of texts on standard input and writes, as JSON, each
// text's cl100k_base token ids as OpenAI's tiktoken's encode_ordinary gives
// them (special tokens' text is ordinary text), through js-tiktoken, its
// JavaScript port with the same ranks: the outside implementation
// tiktoken_test.go holds the embedded tokenizer to.
import { getEncoding } from 'js-tiktoken';

const enc = getEncoding('cl100k_base');
let input = '';
for await (const chunk of process.stdin) input += chunk;
const out = JSON.parse(input).map((text) => Array.from(enc.encode(text, [], [])));
process.stdout.write(JSON.stringify(out));
