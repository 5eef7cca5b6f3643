// The little of @types/node's 'http' that index.d.ts and usage.ts name,
// laid out as @types/node lays it out ('node:http' re-exports 'http'), for
// a machine without @types/node: ../types.check.js uses it only then.
declare module 'http' {
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
declare module 'node:http' {
  export * from 'http';
}
