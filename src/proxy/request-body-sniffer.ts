import { BoundedBody } from '../taps/bounded-body.js';

/**
 * Finds the model a request asks for, beside the forwarded body, parsing it once when it ends.
 * A body that is not JSON, larger than the cap or without a string `model` yields undefined, and the
 * request is forwarded as is either way.
 */
export const MAX_SNIFFED_BODY_BYTES = 1 << 20;

export class RequestBodySniffer {
  private readonly body: BoundedBody | undefined;

  constructor(contentType: string | undefined) {
    const isJson = contentType !== undefined && /\bjson\b/i.test(contentType);
    this.body = isJson ? new BoundedBody(MAX_SNIFFED_BODY_BYTES) : undefined;
  }

  push(chunk: Buffer): void {
    this.body?.push(chunk);
  }

  model(): string | undefined {
    const model = (this.body?.json() as { model?: unknown } | null | undefined)?.model;
    return typeof model === 'string' ? model : undefined;
  }
}
