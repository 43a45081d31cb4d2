/** Reading an export's ZIP in tests (yauzl): every entry's name and exact bytes, in order. */
import yauzl from "yauzl"

export const readZip = (bytes: Uint8Array): Promise<Map<string, Buffer>> =>
  new Promise((resolve, reject) => {
    yauzl.fromBuffer(Buffer.from(bytes), { lazyEntries: true, strictFileNames: true, validateEntrySizes: true }, (error, zip) => {
      if (error) return reject(error)
      const entries = new Map<string, Buffer>()
      zip.on("error", reject)
      zip.on("end", () => resolve(entries))
      zip.on("entry", (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (openError, stream) => {
          if (openError) return reject(openError)
          const chunks: Array<Buffer> = []
          stream.on("data", (chunk: Buffer) => chunks.push(chunk))
          stream.on("error", reject)
          stream.on("end", () => {
            entries.set(entry.fileName, Buffer.concat(chunks))
            zip.readEntry()
          })
        })
      })
      zip.readEntry()
    })
  })
