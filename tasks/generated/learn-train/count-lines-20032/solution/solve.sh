#!/bin/bash
grep -cx maple /app/report.log > /app/total.txt
