import net from 'node:net';

/**
 * A reference point, not a product: the cheapest proxy Node can be, a TCP relay (one 'data'
 * callback and one write per chunk each way, no HTTP parsing). Whatever it costs per token is the
 * floor for any proxy built on Node's sockets; the bench runs it beside nginx and tokentap.
 *
 * Usage: node tcp-relay.js UPSTREAM_PORT; prints "listening on http://127.0.0.1:PORT".
 */
const upstreamPort = Number(process.argv[2]);
if (!Number.isInteger(upstreamPort) || upstreamPort <= 0) {
  process.stderr.write('usage: tcp-relay UPSTREAM_PORT\n');
  process.exit(2);
}

function relay(from: net.Socket, to: net.Socket): void {
  from.on('data', (chunk: Buffer) => {
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
  from.on('end', () => to.end());
  from.on('error', () => to.destroy());
  from.on('close', () => to.destroy());
}

const server = net.createServer({ noDelay: true }, (client) => {
  const upstream = net.connect({ host: '127.0.0.1', port: upstreamPort, noDelay: true });
  relay(client, upstream);
  relay(upstream, client);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as net.AddressInfo;
  process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
