import net, { type AddressInfo } from 'node:net';

/**
 * Model upstreams for the desync cases of the security suite: servers that take a request's body
 * for the next request, each answering in order with the target and Authorization it read, so an
 * answer delivered to the wrong client shows whose request it was.
 */

/**
 * An upstream that answers `Expect: 100-continue` with a final status and then reads on as if no
 * body followed (the Expect-based desync of Kettle's "HTTP/1.1 must die", 2025): the body's bytes
 * become its next request. Requests are answered in order, each non-Expect one 200 ms after it was
 * read (a generation), with the target and Authorization it read.
 */
export async function startExpectDesyncUpstream() {
  const sockets: Array<{ socket: net.Socket; closed: boolean; targets: string[] }> = [];
  const server = net.createServer((socket) => {
    const entry = { socket, closed: false, targets: [] as string[] };
    sockets.push(entry);
    socket.on('close', () => (entry.closed = true));
    socket.on('error', () => {});
    let pending = '';
    let answering = Promise.resolve();
    socket.on('data', (data: Buffer) => {
      pending += data.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        const target = head.split(' ')[1] as string;
        entry.targets.push(target);
        const authorization = /\r\nauthorization: *([^\r]*)/i.exec(head)?.[1] ?? null;
        // As Node's server reads it: 100-continue anywhere in any Expect field.
        const expects = /\r\nexpect:[^\r]*\b100-continue\b/i.test(head);
        answering = answering.then(async () => {
          if (expects) {
            socket.write('HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n');
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, 200));
          const body = JSON.stringify({ target, authorization });
          socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sockets,
    async close() {
      for (const { socket } of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * cpp-httplib, llama.cpp's HTTP server, before yhirose/cpp-httplib@91271c0 (2026-05-15, "Fix
 * keep-alive corruption on requests without framed body"): `expect_content()` read a body only for
 * POST, PUT, PATCH and PRI (DELETE in some versions), whatever Content-Length or Transfer-Encoding
 * said, so the body of a GET was read as the next request on the connection (the 0.CL desync).
 * Modelled here: heads read in order, a body only for those methods, each GET answered 200 ms after
 * it was read with the target and Authorization it read.
 */
export async function startZeroClUpstream() {
  const sockets: Array<{ socket: net.Socket; closed: boolean; targets: string[] }> = [];
  const server = net.createServer((socket) => {
    const entry = { socket, closed: false, targets: [] as string[] };
    sockets.push(entry);
    socket.on('close', () => (entry.closed = true));
    socket.on('error', () => {});
    let pending = '';
    let answering = Promise.resolve();
    socket.on('data', (data: Buffer) => {
      pending += data.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        const [method, target] = head.split(' ') as [string, string];
        const length = ['POST', 'PUT', 'PATCH', 'PRI'].includes(method) ? Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0) : 0;
        if (pending.length < end + 4 + length) return;
        pending = pending.slice(end + 4 + length);
        entry.targets.push(target);
        const authorization = /\r\nauthorization: *([^\r]*)/i.exec(head)?.[1] ?? null;
        answering = answering.then(async () => {
          await new Promise((resolve) => setTimeout(resolve, 200));
          const body = JSON.stringify({ target, authorization });
          socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sockets,
    async close() {
      for (const { socket } of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
