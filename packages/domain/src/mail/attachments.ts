/**
 * Attachment policy: which files are dangerous to open, which images may be previewed inline,
 * and how a sender-chosen filename is made safe to show, store and download.
 *
 * "Dangerous" means: opening the file on a common desktop or phone can run code. Such files are
 * still stored and downloadable, but only with `confirm=1` and as application/octet-stream
 * (interface 4.5), so a false positive costs a click while a false negative can cost a machine.
 * Hence the lists lean towards flagging.
 */

/**
 * Extensions that run code when opened, by platform. Decisions beyond the obvious executables:
 * - Office macro formats (docm, xlsm, pptm and their template/add-in siblings) are flagged;
 *   the macro-free formats (docx, xls, pdf ...) are not.
 * - Disk images (iso, img, vhd, dmg) are flagged: mounting one bypasses Windows' downloaded-file
 *   warning for what is inside, a common malware carrier.
 * - html/htm/xhtml/svg/mht are flagged: opened from disk they run script outside any sandbox and
 *   are the usual carrier of "HTML smuggling" phishing. (The message's own HTML body is not an
 *   attachment and is sanitized separately.)
 * - Archives (zip, rar, 7z) and `.bin` are not flagged: they do not run by themselves, and `.bin`
 *   is the name we give unnamed parts of unknown type.
 */
const DANGEROUS_EXTENSIONS: ReadonlySet<string> = new Set([
  // Windows executables and installers
  "exe", "com", "scr", "pif", "cpl", "msi", "msp", "mst", "msc", "dll", "sys", "drv", "ocx",
  "appx", "appxbundle", "msix", "msixbundle", "application", "appref-ms", "xbap", "gadget",
  // Windows scripts and script hosts
  "bat", "cmd", "js", "jse", "vbs", "vbe", "vb", "wsf", "wsh", "ws", "wsc", "sct", "hta",
  "ps1", "ps1xml", "ps2", "ps2xml", "psc1", "psc2", "psd1", "psm1", "chm", "inf", "reg",
  // Windows shortcuts and shell files that point at or launch code
  "lnk", "scf", "url", "settingcontent-ms", "library-ms", "search-ms", "iqy", "slk",
  // Java and Android
  "jar", "jnlp", "class", "apk", "xapk", "aab",
  // macOS and Linux
  "app", "pkg", "mpkg", "command", "tool", "workflow", "sh", "bash", "zsh", "csh", "ksh",
  "run", "deb", "rpm", "appimage", "desktop",
  // Disk images
  "iso", "img", "vhd", "vhdx", "dmg",
  // Office documents with macros
  "docm", "dotm", "xlsm", "xltm", "xlam", "xll", "pptm", "potm", "ppam", "ppsm", "sldm",
  // Active documents that run script when opened from disk
  "html", "htm", "xhtml", "shtml", "svg", "svgz", "mht", "mhtml",
])

/** MIME types of the same families; `*macroenabled*` Office types are matched by substring. */
const DANGEROUS_MIME_TYPES: ReadonlySet<string> = new Set([
  "application/x-msdownload", "application/x-msdos-program", "application/x-dosexec",
  "application/x-executable", "application/x-elf", "application/x-mach-binary",
  "application/vnd.microsoft.portable-executable", "application/x-ms-installer", "application/x-msi",
  "application/x-ms-shortcut", "application/x-ms-application", "application/x-bat",
  "application/java-archive", "application/x-java-archive", "application/x-java-jnlp-file",
  "application/java-vm", "application/x-java-applet",
  "application/vnd.android.package-archive",
  "application/x-sh", "application/x-shellscript", "application/x-csh", "text/x-shellscript",
  "text/x-sh", "application/x-powershell",
  "text/javascript", "application/javascript", "application/x-javascript", "application/ecmascript",
  "text/ecmascript", "text/jscript", "text/vbscript", "application/x-vbscript",
  "application/hta", "text/x-scriptlet", "application/x-internet-shortcut",
  "application/x-iso9660-image", "application/x-apple-diskimage", "application/x-raw-disk-image",
  "application/x-virtualbox-vhd", "application/x-debian-package", "application/x-rpm",
  "application/vnd.debian.binary-package", "application/x-redhat-package-manager",
  "application/x-apple-installer", "application/vnd.ms-htmlhelp",
  "text/html", "application/xhtml+xml", "image/svg+xml", "application/x-mimearchive",
])

/** The only inline-previewable images: raster formats browsers render without running script. */
const PREVIEWABLE_IMAGE_TYPES: ReadonlySet<string> = new Set([
  "image/png", "image/jpeg", "image/gif", "image/webp",
])

/** File extension for generated names, by MIME type; anything else becomes `.bin`. */
const EXTENSION_BY_MIME_TYPE: ReadonlyMap<string, string> = new Map([
  ["image/png", "png"], ["image/jpeg", "jpg"], ["image/gif", "gif"], ["image/webp", "webp"],
  ["image/bmp", "bmp"], ["image/tiff", "tif"], ["image/svg+xml", "svg"], ["image/heic", "heic"],
  ["application/pdf", "pdf"], ["text/plain", "txt"], ["text/html", "html"], ["text/csv", "csv"],
  ["text/calendar", "ics"], ["application/ics", "ics"], ["message/rfc822", "eml"],
  ["message/delivery-status", "txt"], ["message/feedback-report", "txt"],
  ["application/json", "json"], ["application/xml", "xml"], ["text/xml", "xml"],
  ["application/zip", "zip"], ["application/gzip", "gz"], ["application/x-7z-compressed", "7z"],
  ["application/msword", "doc"], ["application/vnd.ms-excel", "xls"], ["application/vnd.ms-powerpoint", "ppt"],
  ["application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"],
  ["application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"],
  ["application/vnd.openxmlformats-officedocument.presentationml.presentation", "pptx"],
  ["application/vnd.oasis.opendocument.text", "odt"], ["application/vnd.oasis.opendocument.spreadsheet", "ods"],
  ["audio/mpeg", "mp3"], ["audio/ogg", "ogg"], ["audio/wav", "wav"], ["video/mp4", "mp4"], ["video/webm", "webm"],
  ["application/pgp-signature", "asc"], ["application/pgp-keys", "asc"], ["application/pkcs7-signature", "p7s"],
])

/** Longest filename we hand out; the same bound the test-mail API puts on filenames. */
const MAX_FILENAME_LENGTH = 255

/** C0 controls, DEL and C1 controls: never meaningful in a header value or a filename. */
// oxlint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/g

/**
 * Invisible formatting characters. Bidi overrides make `invoice\u202Efdp.exe` display as
 * `invoiceexe.pdf`; zero-width characters hide an extension from a casual reader.
 */
const INVISIBLE_FORMAT_CHARS = /[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/g

/** Characters Windows refuses in filenames; path separators are handled before this. */
const WINDOWS_RESERVED_CHARS = /[<>:"|?*]/g

/** Device names Windows opens instead of a file, whatever the extension. */
const WINDOWS_DEVICE_NAME = /^(con|prn|aux|nul|com[0-9]|lpt[0-9]|conin\$|conout\$)(\.|$)/i

/** `type/subtype` with RFC 6838 restricted-name characters. */
const MIME_TYPE_SHAPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/

/** Removes control characters; what a header value or filename may never carry. */
export const stripControlChars = (value: string): string => value.replace(CONTROL_CHARS, "")

/** Lowercase `type/subtype` without parameters, or application/octet-stream when malformed. */
export const normalizeMimeType = (mimeType: string): string => {
  const bare = (mimeType.split(";")[0] ?? "").trim().toLowerCase()
  return MIME_TYPE_SHAPE.test(bare) ? bare : "application/octet-stream"
}

const stripInvisible = (value: string): string =>
  stripControlChars(value).replace(INVISIBLE_FORMAT_CHARS, "")

/** The last path component: senders may send `../../etc/passwd` or `C:\x\evil.exe`. */
const lastPathComponent = (value: string): string => {
  const parts = value.split(/[/\\]/)
  return parts[parts.length - 1] ?? ""
}

/**
 * Windows ignores trailing dots and spaces, so `evil.exe. ` opens as `evil.exe`. A loop, not
 * `/[.\s]+$/`, which backtracks quadratically over a long run of spaces mid-string.
 */
const stripTrailingDotsAndSpaces = (value: string): string => {
  let end = value.length
  while (end > 0 && /[.\s]/u.test(value.charAt(end - 1))) end--
  return value.slice(0, end)
}

const extensionOf = (filename: string): string => {
  const dot = filename.lastIndexOf(".")
  return dot < 0 ? "" : filename.slice(dot + 1)
}

/**
 * The names a filename could be read as by some consumer: as shown (invisible characters
 * removed, trailing dots and spaces dropped), cut at the first control character (C strings
 * stop at NUL: `evil.exe\0.pdf`), and cut at the first colon (NTFS streams: `evil.exe:x.pdf`).
 */
const readingsOf = (filename: string): Array<string> => {
  const base = lastPathComponent(filename.replace(INVISIBLE_FORMAT_CHARS, ""))
  const cutAtControl = base.split(CONTROL_CHARS)[0] ?? ""
  const cutAtColon = base.split(":")[0] ?? ""
  return [stripControlChars(base), cutAtControl, cutAtColon]
    .map((name) => stripTrailingDotsAndSpaces(name.trim()).toLowerCase())
}

const hasDangerousExtension = (filename: string): boolean =>
  readingsOf(filename).some((name) => DANGEROUS_EXTENSIONS.has(extensionOf(name)))

const hasDangerousMimeType = (mimeType: string): boolean => {
  const type = normalizeMimeType(mimeType)
  return DANGEROUS_MIME_TYPES.has(type) || type.includes("macroenabled")
}

/**
 * Whether opening the attachment could run code. Decided by the final extension (so
 * `invoice.pdf.exe` is dangerous, `setup.exe.txt` is not), case-insensitively, after removing
 * what hides an extension (bidi overrides, trailing dots and spaces, NUL, NTFS stream suffixes);
 * or by the declared MIME type.
 */
export const isDangerousAttachment = (filename: string, mimeType: string): boolean =>
  hasDangerousExtension(filename) || hasDangerousMimeType(mimeType)

/** Whether an attachment may be shown inline as an image: safe raster formats only, never SVG. */
export const isPreviewableImage = (filename: string, mimeType: string): boolean =>
  PREVIEWABLE_IMAGE_TYPES.has(normalizeMimeType(mimeType)) && !isDangerousAttachment(filename, mimeType)

/**
 * Magic numbers of native executables and scripts, so a `.pdf` that is really a Windows program
 * is still flagged: MZ (PE), ELF, Mach-O (both byte orders, 32/64 bit and fat, which shares
 * CAFEBABE with Java classes) and `#!` scripts.
 */
const EXECUTABLE_SIGNATURES: ReadonlyArray<ReadonlyArray<number>> = [
  [0x4d, 0x5a],
  [0x7f, 0x45, 0x4c, 0x46],
  [0xfe, 0xed, 0xfa, 0xce], [0xfe, 0xed, 0xfa, 0xcf], [0xce, 0xfa, 0xed, 0xfe], [0xcf, 0xfa, 0xed, 0xfe],
  [0xca, 0xfe, 0xba, 0xbe],
  [0x23, 0x21],
]

/** Whether the content starts like a native executable or a script, whatever it is called. */
export const looksExecutable = (content: Uint8Array): boolean =>
  EXECUTABLE_SIGNATURES.some((signature) => signature.every((byte, i) => content[i] === byte))

/** Extension for a generated filename, from the MIME type, `bin` when unknown. */
export const extensionForMimeType = (mimeType: string): string =>
  EXTENSION_BY_MIME_TYPE.get(normalizeMimeType(mimeType)) ?? "bin"

/** Cuts a name to `max` code points, keeping a short extension so the type stays visible. */
const truncateFilename = (name: string, max: number): string => {
  const codePoints = Array.from(name)
  if (codePoints.length <= max) return name
  const extension = extensionOf(name)
  const keep = extension.length > 0 && extension.length <= 16 ? Array.from(`.${extension}`) : []
  return codePoints.slice(0, max - keep.length).join("") + keep.join("")
}

/**
 * A filename that is safe to show, store and put in a download: no control or invisible
 * characters, no path components, no characters Windows refuses, no leading dots (`..`, hidden
 * files), no trailing dots or spaces, not a Windows device name, at most 255 code points. When
 * nothing usable is left, `attachment-<index>.<ext>` with the extension taken from the MIME type.
 * The extension is never changed, so `isDangerousAttachment` judges the name the user will see.
 */
export const safeFilename = (name: string, index: number, mimeType: string): string => {
  const cleaned = stripTrailingDotsAndSpaces(
    lastPathComponent(stripInvisible(name))
      .replace(WINDOWS_RESERVED_CHARS, "_")
      .replace(/^[.\s]+/u, ""),
  )
  if (cleaned.length === 0) return `attachment-${index}.${extensionForMimeType(mimeType)}`
  const notADevice = WINDOWS_DEVICE_NAME.test(cleaned) ? `_${cleaned}` : cleaned
  return stripTrailingDotsAndSpaces(truncateFilename(notADevice, MAX_FILENAME_LENGTH))
}
