#!/bin/bash
grep -cx island /app/report.lst > /app/answer.txt
