// tr46 (UTS #46) ships no types; these are the two functions src/url.ts uses.
declare module "tr46" {
  interface Options {
    checkBidi?: boolean;
    checkHyphens?: boolean;
    checkJoiners?: boolean;
    useSTD3ASCIIRules?: boolean;
    transitionalProcessing?: boolean;
    verifyDNSLength?: boolean;
    ignoreInvalidPunycode?: boolean;
  }
  export function toASCII(domainName: string, options?: Options): string | null;
  export function toUnicode(domainName: string, options?: Options): { domain: string; error: boolean };
}
