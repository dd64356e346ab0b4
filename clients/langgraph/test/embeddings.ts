// A small deterministic embedding for the tests and the example: hashed
// bag of words, 64 dimensions. It is the application's model, not a part of
// shredd; any EmbeddingsInterface works the same.
import type { EmbeddingsInterface } from "@langchain/core/embeddings";

export class HashEmbeddings implements EmbeddingsInterface {
  embed(text: string): number[] {
    const v = new Array<number>(64).fill(0);
    for (const w of text.toLowerCase().match(/[a-z]+/g) ?? []) {
      let h = 2166136261;
      for (const ch of w) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
      v[(h >>> 0) % 64]! += 1;
    }
    return v;
  }
  async embedDocuments(texts: string[]): Promise<number[][]> {
    return texts.map((t) => this.embed(t));
  }
  async embedQuery(text: string): Promise<number[]> {
    return this.embed(text);
  }
}
