/**
 * Whether a Content-Type is gRPC's: `application/grpc`, alone or with a `+` subtype (`+proto`,
 * `+json`...), parameters aside (PROTOCOL-HTTP2.md, "Content-Type"). gRPC-Web
 * (`application/grpc-web*`) is another protocol and is not.
 */
export function isGrpcContentType(contentType: string | string[] | undefined): boolean {
  if (typeof contentType !== 'string') return false;
  const mediaType = (contentType.split(';', 1)[0] as string).trim().toLowerCase();
  return mediaType === 'application/grpc' || mediaType.startsWith('application/grpc+');
}
