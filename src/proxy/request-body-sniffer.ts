/**
 * Finds the model a request asks for, beside the forwarded body: chunks are kept by reference (no
 * copy) up to a cap and parsed once when the body ends, never per chunk. A body that is not JSON,
 * too large or without a string `model` yields undefined, and the request is still forwarded as is.
 */
export const MAX_SNIFFED_BODY_BYTES = 1 << 20;

export class RequestBodySniffer {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private active: boolean;

  constructor(contentType: string | undefined) {
    this.active = contentType !== undefined && /\bjson\b/i.test(contentType);
  }

  push(chunk: Buffer): void {
    if (!this.active) return;
    this.size += chunk.length;
    if (this.size > MAX_SNIFFED_BODY_BYTES) {
      this.active = false;
      this.chunks.length = 0;
      return;
    }
    this.chunks.push(chunk);
  }

  model(): string | undefined {
    if (!this.active || this.size === 0) return undefined;
    try {
      const body: unknown = JSON.parse(Buffer.concat(this.chunks, this.size).toString('utf8'));
      const model = (body as { model?: unknown } | null)?.model;
      return typeof model === 'string' ? model : undefined;
    } catch {
      return undefined;
    } finally {
      this.chunks.length = 0;
    }
  }
}
