/**
 * The body of an HTTP answer as text, read until `maxBytes` and no further: what the CLI reads from
 * an address a user typed may be anything (a proxy's login page, a stream that never ends), so it
 * never holds more than the largest answer the command expects.
 */
export async function readBounded(response: Response, maxBytes: number): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw new Error(`the answer exceeds ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
