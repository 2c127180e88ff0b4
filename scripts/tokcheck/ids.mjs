// Tokenizes the rendered text of each golden file in tokenizer/testdata/golden
// with Hugging Face's own tokenizers (the JavaScript port, which reads the
// same tokenizer.json) and compares the ids with the golden ones.
//
//   cd scripts/tokcheck && npm install && node ids.mjs
import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';

const root = path.join(import.meta.dirname, '..', '..', 'tokenizer', 'testdata');
let failed = false;
for (const model of ['llama3', 'qwen2.5']) {
  const read = (f) => JSON.parse(fs.readFileSync(path.join(root, model, f), 'utf8'));
  const tok = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
  const golden = fs.readFileSync(path.join(root, 'golden', model + '.txt'), 'utf8');
  const cut = golden.lastIndexOf('\n---- ');
  const text = golden.slice(0, cut);
  const want = golden.slice(cut).split('\n')[2];
  const ids = `[${Array.from(tok.encode(text, { add_special_tokens: false }).ids).join(' ')}]`;
  const same = ids === want;
  failed ||= !same;
  console.log(`${model}: tokenizers.js gives ${same ? 'the same' : 'OTHER'} ids as the golden file`);
}
process.exit(failed ? 1 : 0);
