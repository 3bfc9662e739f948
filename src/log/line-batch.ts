import pino from 'pino';

/** What LineBatch needs of pino's asynchronous destination (a sonic-boom). */
export interface BatchedDestination {
  write(text: string): boolean;
  flush(callback?: (error?: Error) => void): void;
}

/**
 * Log lines gathered and handed to the destination a batch at a time, as one string.
 *
 * Why not hand each line to sonic-boom (pino's destination), which batches too: its write() measures
 * the UTF-8 length of the string it is still gathering on every call (`Buffer.byteLength` of its
 * last buffer, sonic-boom 4.2.1 and 5.0.2), which first flattens that concatenated string, a copy.
 * With 16 KiB batches of 300-500-byte request lines, each line cost a copy and a scan of the 8 KiB
 * or so gathered before it: 110,000 instructions per line under callgrind (with the string's
 * allocation on top), in a write that should cost one line's length. Here each line is pushed to an
 * array; sonic-boom measures one string per batch.
 *
 * Lines leave in the order they were written: pino's own lines come through here too.
 */
export class LineBatch {
  private lines: string[] = [];
  private chars = 0;
  /** A line came since the last tick(). */
  private unwritten = false;

  constructor(
    private readonly destination: BatchedDestination,
    /** The destination's file descriptor, written synchronously at exit. */
    private readonly fd: number,
    /** Characters gathered before they are handed over (a line's characters are at most its bytes). */
    private readonly batchChars: number,
  ) {}

  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    this.unwritten = true;
    if (this.chars >= this.batchChars) this.release();
    return true;
  }

  /**
   * The periodic flush (logger.ts): whatever came since the last tick is written now, so that a
   * lone line never waits for a full batch.
   */
  tick(): void {
    if (!this.unwritten) return;
    this.unwritten = false;
    this.flush();
  }

  /** pino's logger.flush() calls this: everything gathered is written, asynchronously. */
  flush(callback?: (error?: Error) => void): void {
    this.release();
    try {
      this.destination.flush(callback);
    } catch (error) {
      // Destroyed (closed stdout, end of the process): nothing left to write to.
      callback?.(error as Error);
    }
  }

  /**
   * At the process's exit, after pino's own exit flush has written what the destination held: the
   * lines gathered here, written synchronously through a synchronous destination on the same file
   * descriptor (its writes retry EAGAIN on a non-blocking pipe), since an asynchronous write started
   * now would never finish.
   */
  writeAtExit(): void {
    const text = this.take();
    if (text === '') return;
    try {
      const now = pino.destination({ dest: this.fd, sync: true });
      now.write(text);
      now.flushSync();
    } catch {
      // A closed or broken stdout: nothing can take the lines any more.
    }
  }

  private release(): void {
    const text = this.take();
    if (text === '') return;
    try {
      this.destination.write(text);
    } catch {
      // Destroyed: see flush().
    }
  }

  private take(): string {
    if (this.lines.length === 0) return '';
    const text = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    return text;
  }
}
