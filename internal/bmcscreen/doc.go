// Package bmcscreen drives a machine's screen through its BMC's Redfish
// service alone, as a person at the console would: a screenshot (Dell's
// DellLCService.ExportServerScreenShot where the Manager names it, else
// vbmcd's Bmlab.ExportScreenShot), keys typed (vbmcd's Bmlab.SendKeys, a
// sequence written "root<Enter>"), the serial output (Bmlab.ExportSerialData),
// and WaitFor, which looks for a text on the screen, read by OCR (Debian's
// tesseract-ocr, ocr.go), and in the serial output until it appears or
// the deadline passes. labctl's console command and the project's tests
// use it.
//
// What it does not do: serve anything, or reach a machine but through its
// BMC.
package bmcscreen
