import { describe, expect, it } from "@effect/vitest"
import {
  extensionForMimeType,
  isDangerousAttachment,
  isPreviewableImage,
  looksExecutable,
  normalizeMimeType,
  safeFilename,
} from "../src/mail/attachments.ts"

const OCTET = "application/octet-stream"

describe("isDangerousAttachment", () => {
  const table: ReadonlyArray<readonly [filename: string, mimeType: string, dangerous: boolean]> = [
    // Executables and scripts by extension, whatever the declared type
    ["setup.exe", OCTET, true],
    ["run.bat", "text/plain", true],
    ["run.cmd", OCTET, true],
    ["old.com", OCTET, true],
    ["screensaver.scr", OCTET, true],
    ["app.pif", OCTET, true],
    ["payload.js", "text/plain", true],
    ["payload.jse", OCTET, true],
    ["macro.vbs", OCTET, true],
    ["macro.vbe", OCTET, true],
    ["job.wsf", OCTET, true],
    ["job.wsh", OCTET, true],
    ["tool.jar", OCTET, true],
    ["installer.msi", OCTET, true],
    ["patch.msp", OCTET, true],
    ["script.ps1", OCTET, true],
    ["module.psm1", OCTET, true],
    ["game.apk", OCTET, true],
    ["mac.dmg", OCTET, true],
    ["disk.iso", OCTET, true],
    ["disk.img", OCTET, true],
    ["shortcut.lnk", OCTET, true],
    ["page.hta", OCTET, true],
    ["panel.cpl", OCTET, true],
    ["settings.reg", OCTET, true],
    ["install.sh", "text/plain", true],
    ["Thing.app", OCTET, true],
    ["pkg.deb", OCTET, true],
    ["pkg.rpm", OCTET, true],
    ["store.appx", OCTET, true],
    ["store.msix", OCTET, true],
    ["explorer.scf", OCTET, true],
    ["link.url", OCTET, true],
    // Office macro formats are dangerous, their macro-free siblings are not
    ["budget.xlsm", OCTET, true],
    ["letter.docm", OCTET, true],
    ["deck.pptm", OCTET, true],
    ["budget.xlsx", OCTET, false],
    ["letter.docx", OCTET, false],
    // Active documents that run script when opened from disk
    ["receipt.html", OCTET, true],
    ["chart.svg", OCTET, true],
    // Double extensions: the last one counts
    ["invoice.pdf.exe", OCTET, true],
    ["photo.jpg.scr", "image/jpeg", true],
    ["setup.exe.txt", "text/plain", false],
    // Case, trailing dots and spaces, disguises
    ["INVOICE.EXE", OCTET, true],
    ["Invoice.Pdf.ExE", OCTET, true],
    ["evil.exe.", OCTET, true],
    ["evil.exe . . ", OCTET, true],
    ["invoice\u202efdp.exe", OCTET, true],
    ["evil.exe\u0000.pdf", "application/pdf", true],
    ["evil.exe:hidden.pdf", "application/pdf", true],
    ["dir/sub/evil.exe", OCTET, true],
    ["C:\\temp\\evil.EXE", OCTET, true],
    // By MIME type, whatever the name
    ["report", "application/x-msdownload", true],
    ["report.pdf", "application/x-dosexec", true],
    ["a", "application/java-archive", true],
    ["a", "application/vnd.android.package-archive", true],
    ["a", "application/x-sh", true],
    ["a", "text/javascript", true],
    ["a", "application/javascript; charset=utf-8", true],
    ["a", "application/hta", true],
    ["a", "application/x-ms-shortcut", true],
    ["a", "application/x-iso9660-image", true],
    ["a", "application/x-apple-diskimage", true],
    ["a", "Application/X-MSDownload", true],
    ["a", "application/vnd.ms-excel.sheet.macroEnabled.12", true],
    ["a", "image/svg+xml", true],
    ["a", "text/html", true],
    // Ordinary files
    ["report.pdf", "application/pdf", false],
    ["photo.jpeg", "image/jpeg", false],
    ["archive.zip", "application/zip", false],
    ["notes.txt", "text/plain", false],
    ["attachment-1.bin", OCTET, false],
    ["", OCTET, false],
    ["exe", OCTET, false],
    ["no-extension", OCTET, false],
  ]
  for (const [filename, mimeType, dangerous] of table) {
    it(`${JSON.stringify(filename)} as ${mimeType} is ${dangerous ? "dangerous" : "not dangerous"}`, () => {
      expect(isDangerousAttachment(filename, mimeType)).toBe(dangerous)
    })
  }
})

describe("isPreviewableImage", () => {
  const table: ReadonlyArray<readonly [filename: string, mimeType: string, previewable: boolean]> = [
    ["a.png", "image/png", true],
    ["a.jpg", "image/jpeg", true],
    ["a.jpg", "IMAGE/JPEG; name=a.jpg", true],
    ["a.gif", "image/gif", true],
    ["a.webp", "image/webp", true],
    ["logo", "image/png", true],
    ["a.svg", "image/svg+xml", false],
    ["a.png", "image/svg+xml", false],
    ["a.bmp", "image/bmp", false],
    ["a.tiff", "image/tiff", false],
    ["a.heic", "image/heic", false],
    ["a.png", "application/octet-stream", false],
    ["a.png", "text/html", false],
    ["photo.png.exe", "image/png", false],
    ["photo.html", "image/png", false],
  ]
  for (const [filename, mimeType, previewable] of table) {
    it(`${filename} as ${mimeType} is ${previewable ? "previewable" : "not previewable"}`, () => {
      expect(isPreviewableImage(filename, mimeType)).toBe(previewable)
    })
  }
})

describe("safeFilename", () => {
  const table: ReadonlyArray<readonly [name: string, index: number, mimeType: string, safe: string]> = [
    ["report.pdf", 1, "application/pdf", "report.pdf"],
    ["résumé 2024.pdf", 1, "application/pdf", "résumé 2024.pdf"],
    ["../../etc/passwd", 1, "text/plain", "passwd"],
    ["C:\\Windows\\System32\\evil.exe", 1, OCTET, "evil.exe"],
    ["/absolute/path.txt", 1, "text/plain", "path.txt"],
    ["dir/", 2, "text/plain", "attachment-2.txt"],
    ["..", 3, "image/png", "attachment-3.png"],
    [".", 1, OCTET, "attachment-1.bin"],
    ["", 1, OCTET, "attachment-1.bin"],
    ["   ", 4, "application/pdf", "attachment-4.pdf"],
    ["", 5, "image/jpeg", "attachment-5.jpg"],
    ["", 6, "message/rfc822", "attachment-6.eml"],
    ["", 7, "text/calendar", "attachment-7.ics"],
    ["", 8, "garbage", "attachment-8.bin"],
    [".bashrc", 1, "text/plain", "bashrc"],
    ["a\u0000b\u0007c.txt", 1, "text/plain", "abc.txt"],
    ["line\r\nbreak.txt", 1, "text/plain", "linebreak.txt"],
    ["invoice\u202efdp.exe", 1, OCTET, "invoicefdp.exe"],
    ["zero\u200bwidth.pdf", 1, "application/pdf", "zerowidth.pdf"],
    ["evil.exe. . ", 1, OCTET, "evil.exe"],
    ["what?<is>this*.txt", 1, "text/plain", "what__is_this_.txt"],
    ["evil.exe:stream", 1, OCTET, "evil.exe_stream"],
    ["\"quoted\".txt", 1, "text/plain", "_quoted_.txt"],
    ["CON", 1, "text/plain", "_CON"],
    ["nul.txt", 1, "text/plain", "_nul.txt"],
    ["console.txt", 1, "text/plain", "console.txt"],
    [`${"a".repeat(300)}.pdf`, 1, "application/pdf", `${"a".repeat(251)}.pdf`],
    [`${"😀".repeat(300)}.txt`, 1, "text/plain", `${"😀".repeat(251)}.txt`],
  ]
  for (const [name, index, mimeType, safe] of table) {
    it(`${JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}...` : name)} becomes ${JSON.stringify(safe.length > 40 ? `${safe.slice(0, 40)}...` : safe)}`, () => {
      expect(safeFilename(name, index, mimeType)).toBe(safe)
    })
  }

  it("never yields a name with a path, control characters, or over 255 code points", () => {
    const hostile = ["a/../../b", "\\\\server\\share\\x.exe", "\u0000", "x".repeat(10_000), ". . .", "a\tb"]
    for (const name of hostile) {
      const safe = safeFilename(name, 9, OCTET)
      expect(safe).not.toMatch(/[/\\\u0000-\u001f]/)
      expect(Array.from(safe).length).toBeLessThanOrEqual(255)
      expect(safe.length).toBeGreaterThan(0)
    }
  })

  it("stays fast on a long run of spaces (no regex backtracking)", () => {
    const started = performance.now()
    safeFilename(`a${" ".repeat(200_000)}b`, 1, OCTET)
    // Generous: quadratic backtracking over 200,000 spaces takes tens of seconds, a busy machine seconds.
    expect(performance.now() - started).toBeLessThan(10_000)
  })
})

describe("helpers", () => {
  it("normalizes MIME types and refuses malformed ones", () => {
    expect(normalizeMimeType("Image/PNG; name=x.png")).toBe("image/png")
    expect(normalizeMimeType("text/")).toBe(OCTET)
    expect(normalizeMimeType("")).toBe(OCTET)
    expect(normalizeMimeType("a b/c")).toBe(OCTET)
  })

  it("picks extensions for generated names", () => {
    expect(extensionForMimeType("image/jpeg")).toBe("jpg")
    expect(extensionForMimeType("application/x-unknown")).toBe("bin")
  })

  it("recognizes executables by their first bytes", () => {
    expect(looksExecutable(new Uint8Array([0x4d, 0x5a, 0x90, 0x00]))).toBe(true)
    expect(looksExecutable(new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 0x02]))).toBe(true)
    expect(looksExecutable(new TextEncoder().encode("#!/bin/sh\n"))).toBe(true)
    expect(looksExecutable(new TextEncoder().encode("%PDF-1.7"))).toBe(false)
    expect(looksExecutable(new Uint8Array([0x4d]))).toBe(false)
    expect(looksExecutable(new Uint8Array(0))).toBe(false)
  })
})
