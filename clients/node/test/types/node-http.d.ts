// The little of @types/node's 'node:http' that index.d.ts and usage.ts
// name, for a machine without @types/node (Debian packages none):
// ../types.check.js uses it only when @types/node is not found.
declare module 'node:http' {
  class IncomingMessage {
    headers: Record<string, string | string[] | undefined>;
    method?: string;
    url?: string;
  }
  class ServerResponse {
    statusCode: number;
    setHeader(name: string, value: number | string | readonly string[]): this;
    end(chunk?: unknown): this;
  }
}
